//! Classification of one adapter attempt: what the outcome means for the delivery.
//!
//! | Outcome                                   | Class                 | Why |
//! |-------------------------------------------|-----------------------|-----|
//! | 2xx                                       | `Success`             | the receiver acknowledged the change |
//! | 408 Request Timeout                       | `Transient`           | the receiver gave up waiting; try again |
//! | 429 Too Many Requests                     | `Transient` + Retry-After | rate limited; honour the receiver's delay |
//! | 503 Service Unavailable                   | `Transient` + Retry-After | overloaded or in maintenance; honour the delay |
//! | other 5xx (500, 501, 502, 504, …)         | `Transient`           | server-side trouble; the bounded schedule limits the cost |
//! | other 4xx (400, 401, 403, 404, 410, …)    | `Permanent`           | the receiver refuses this request; repeating it will not help |
//! | 1xx, 3xx                                  | `Permanent`           | we never follow redirects (a redirect could lead to a forbidden address and means the endpoint URL is misconfigured) |
//! | anything outside 100..=599                | `Permanent`           | not HTTP |
//! | timeout, connect failure, TLS failure, other transport failure | `Transient` | see [`classify_transport`] |
//! | resolved address refused by the SSRF policy | `Permanent`         | every retry would resolve the same |
//!
//! Retry-After is read only on 429 and 503, the two statuses for which HTTP defines it as a retry
//! hint. `ConfigurationLoss` (subscription or account gone, event access no longer accepted) is
//! never produced from an HTTP answer: the shell decides it from our own records before or
//! instead of calling the adapter. It moves a delivery to `failed` (operator-retryable) rather
//! than `dead`.

use crate::domain::time::Timestamp;
use std::time::Duration;

/// The meaning of one attempt for the delivery lifecycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttemptClass {
    /// Acknowledged: the delivery is `delivered` / `sent`.
    Success,
    /// Worth another attempt, after at least `retry_after` if the receiver asked for one.
    Transient { retry_after: Option<Duration> },
    /// No attempt will succeed: the delivery is `dead`.
    Permanent,
    /// Our own configuration rules the delivery out (subscription or account deleted, access
    /// withdrawn): the delivery is `failed`.
    ConfigurationLoss,
}

impl AttemptClass {
    /// The stored label: `success`, `transient`, `permanent` or `configuration_loss`.
    pub fn as_str(&self) -> &'static str {
        match self {
            AttemptClass::Success => "success",
            AttemptClass::Transient { .. } => "transient",
            AttemptClass::Permanent => "permanent",
            AttemptClass::ConfigurationLoss => "configuration_loss",
        }
    }

    /// Whether the retry policy should be consulted.
    pub fn is_retryable(&self) -> bool {
        matches!(self, AttemptClass::Transient { .. })
    }

    /// The receiver's requested delay, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            AttemptClass::Transient { retry_after } => *retry_after,
            _ => None,
        }
    }
}

/// Classifies the status of an HTTP answer (see the module table). `retry_after_header` is the raw
/// `Retry-After` header value, `now` the time the answer arrived.
pub fn classify_http_status(
    status: u16,
    retry_after_header: Option<&str>,
    now: Timestamp,
) -> AttemptClass {
    match status {
        200..=299 => AttemptClass::Success,
        429 | 503 => AttemptClass::Transient {
            retry_after: retry_after_header.and_then(|v| parse_retry_after(v, now)),
        },
        408 | 500..=599 => AttemptClass::Transient { retry_after: None },
        _ => AttemptClass::Permanent,
    }
}

/// A failure before any HTTP status arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportFailure {
    /// No complete answer within the attempt's deadline. The receiver may still have processed the
    /// change; delivery is at least once and receivers deduplicate on `webhook-id`.
    Timeout,
    /// DNS failure, refused or reset connection.
    Connect,
    /// TLS handshake or certificate failure.
    Tls,
    /// Anything else (malformed answer, body read error, …).
    Other,
    /// A resolved address is refused by the SSRF policy ([`crate::domain::ssrf::check_resolved`]).
    ForbiddenTarget,
}

impl TransportFailure {
    /// Its word in an attempt's history (the classified error of an attempt with no answer).
    pub fn as_str(self) -> &'static str {
        match self {
            TransportFailure::Timeout => "timeout",
            TransportFailure::Connect => "connect",
            TransportFailure::Tls => "tls",
            TransportFailure::Other => "transport",
            TransportFailure::ForbiddenTarget => "forbidden_target",
        }
    }
}

/// Classifies a transport failure. Timeouts, connection failures and other transport errors are
/// transient. **TLS failures are transient too**: handshakes fail for passing reasons (resets,
/// overloaded terminators) and an expired certificate is usually renewed within hours, which the
/// fixed schedule (about 8½ hours end to end) covers; a delivery that still fails ends `dead` with
/// the TLS reason recorded. A forbidden target is permanent: every retry would resolve the same.
pub fn classify_transport(failure: &TransportFailure) -> AttemptClass {
    match failure {
        TransportFailure::Timeout
        | TransportFailure::Connect
        | TransportFailure::Tls
        | TransportFailure::Other => AttemptClass::Transient { retry_after: None },
        TransportFailure::ForbiddenTarget => AttemptClass::Permanent,
    }
}

/// Parses a `Retry-After` value: delta-seconds (`120`) or an HTTP-date in any of the three formats
/// HTTP allows (IMF-fixdate `Sun, 06 Nov 1994 08:49:37 GMT`, RFC 850, asctime), relative to
/// `now`. A date in the past gives zero. Anything else (negative numbers, fractions, garbage)
/// gives `None`. No upper bound is applied here; the retry policies cap it.
pub fn parse_retry_after(value: &str, now: Timestamp) -> Option<Duration> {
    let value = value.trim();
    if value.is_empty() {
        return None;
    }
    if value.bytes().all(|b| b.is_ascii_digit()) {
        // Saturate absurdly long digit strings rather than rejecting them.
        return Some(Duration::from_secs(
            value.parse::<u64>().unwrap_or(u64::MAX),
        ));
    }
    let at = parse_http_date(value)?;
    Some(at.since(now))
}

fn parse_http_date(value: &str) -> Option<Timestamp> {
    use chrono::{DateTime, NaiveDateTime};
    if let Ok(t) = DateTime::parse_from_rfc2822(value) {
        return Some(Timestamp(t.timestamp_millis()));
    }
    for format in ["%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(value, format) {
            return Some(Timestamp(t.and_utc().timestamp_millis()));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    // 2015-10-21T07:28:00Z
    const NOW: Timestamp = Timestamp(1_445_412_480_000);

    #[test]
    fn two_hundreds_are_success() {
        for s in [200, 201, 202, 204, 299] {
            assert_eq!(
                classify_http_status(s, None, NOW),
                AttemptClass::Success,
                "{s}"
            );
        }
    }

    #[test]
    fn timeouts_rate_limits_and_server_errors_are_transient() {
        for s in [408, 500, 501, 502, 504, 505, 599] {
            assert_eq!(
                classify_http_status(s, Some("120"), NOW),
                AttemptClass::Transient { retry_after: None },
                "{s} ignores Retry-After"
            );
        }
        for s in [429, 503] {
            assert_eq!(
                classify_http_status(s, Some("120"), NOW),
                AttemptClass::Transient {
                    retry_after: Some(Duration::from_secs(120))
                },
                "{s} honours Retry-After"
            );
            assert_eq!(
                classify_http_status(s, None, NOW),
                AttemptClass::Transient { retry_after: None }
            );
            assert_eq!(
                classify_http_status(s, Some("soon"), NOW),
                AttemptClass::Transient { retry_after: None }
            );
        }
        assert_eq!(
            classify_http_status(429, Some("Wed, 21 Oct 2015 07:30:00 GMT"), NOW).retry_after(),
            Some(Duration::from_secs(120))
        );
    }

    #[test]
    fn other_client_errors_redirects_and_nonsense_are_permanent() {
        for s in [400, 401, 403, 404, 405, 409, 410, 413, 415, 422, 499] {
            assert_eq!(
                classify_http_status(s, None, NOW),
                AttemptClass::Permanent,
                "{s}"
            );
        }
        for s in [100, 101, 301, 302, 303, 304, 307, 308] {
            assert_eq!(
                classify_http_status(s, None, NOW),
                AttemptClass::Permanent,
                "{s}"
            );
        }
        for s in [0, 99, 600, 999] {
            assert_eq!(
                classify_http_status(s, None, NOW),
                AttemptClass::Permanent,
                "{s}"
            );
        }
    }

    #[test]
    fn transport_failures() {
        for f in [
            TransportFailure::Timeout,
            TransportFailure::Connect,
            TransportFailure::Tls,
            TransportFailure::Other,
        ] {
            assert_eq!(
                classify_transport(&f),
                AttemptClass::Transient { retry_after: None },
                "{f:?}"
            );
        }
        assert_eq!(
            classify_transport(&TransportFailure::ForbiddenTarget),
            AttemptClass::Permanent
        );
    }

    #[test]
    fn labels_and_helpers() {
        assert_eq!(AttemptClass::Success.as_str(), "success");
        assert_eq!(
            AttemptClass::Transient { retry_after: None }.as_str(),
            "transient"
        );
        assert_eq!(AttemptClass::Permanent.as_str(), "permanent");
        assert_eq!(
            AttemptClass::ConfigurationLoss.as_str(),
            "configuration_loss"
        );
        assert!(AttemptClass::Transient { retry_after: None }.is_retryable());
        assert!(!AttemptClass::Permanent.is_retryable());
        assert!(!AttemptClass::ConfigurationLoss.is_retryable());
        assert!(!AttemptClass::Success.is_retryable());
        assert_eq!(AttemptClass::Permanent.retry_after(), None);
    }

    #[test]
    fn retry_after_delta_seconds() {
        assert_eq!(parse_retry_after("0", NOW), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after(" 3600 ", NOW),
            Some(Duration::from_secs(3600))
        );
        assert_eq!(
            parse_retry_after("99999999999999999999999", NOW),
            Some(Duration::from_secs(u64::MAX))
        );
        for bad in [
            "",
            "  ",
            "-5",
            "1.5",
            "+3",
            "10s",
            "tomorrow",
            "Wed, 32 Oct 2015 07:28:00 GMT",
        ] {
            assert_eq!(parse_retry_after(bad, NOW), None, "{bad:?}");
        }
    }

    #[test]
    fn retry_after_http_dates_in_all_three_formats() {
        let two_minutes = Some(Duration::from_secs(120));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:30:00 GMT", NOW),
            two_minutes
        );
        assert_eq!(
            parse_retry_after("Wednesday, 21-Oct-15 07:30:00 GMT", NOW),
            two_minutes
        );
        assert_eq!(
            parse_retry_after("Wed Oct 21 07:30:00 2015", NOW),
            two_minutes
        );
        assert_eq!(
            parse_retry_after("Thu, 1 Oct 2015 07:30:00 GMT", NOW),
            Some(Duration::ZERO),
            "a past date means now"
        );
        assert_eq!(
            parse_retry_after("Wed Oct  7 07:28:00 2015", NOW),
            Some(Duration::ZERO)
        );
    }
}
