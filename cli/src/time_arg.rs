//! A time given as an argument: RFC 3339 (`2024-05-01T00:00:00Z`), `now`, or relative to now
//! (`now-7d`, `-36h`; units `s`, `m`, `h`, `d`), sent to the API as RFC 3339.

use chrono::{DateTime, SecondsFormat, Utc};

/// clap's value parser for a time argument.
pub fn parse(text: &str) -> Result<String, String> {
    parse_at(text, Utc::now())
}

fn parse_at(text: &str, now: DateTime<Utc>) -> Result<String, String> {
    let text = text.trim();
    let rfc = |t: DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Millis, true);
    if text == "now" {
        return Ok(rfc(now));
    }
    if let Some(rest) = text.strip_prefix("now-").or_else(|| text.strip_prefix('-')) {
        let (digits, unit) = rest.split_at(rest.len().saturating_sub(1));
        let n: i64 = digits
            .parse()
            .map_err(|_| format!("{text:?}: expected e.g. now-7d, -36h, now"))?;
        let seconds = match unit {
            "s" => n,
            "m" => n * 60,
            "h" => n * 3600,
            "d" => n * 86_400,
            _ => return Err(format!("{text:?}: the unit is one of s, m, h, d")),
        };
        return Ok(rfc(now - chrono::Duration::seconds(seconds)));
    }
    DateTime::parse_from_rfc3339(text)
        .map(|t| rfc(t.with_timezone(&Utc)))
        .map_err(|_| {
            format!("{text:?} is not a time: use RFC 3339 (2024-05-01T00:00:00Z), now or now-7d")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn times_are_rfc3339_now_or_relative() {
        let now = Utc.with_ymd_and_hms(2024, 5, 8, 12, 0, 0).unwrap();
        assert_eq!(parse_at("now", now).unwrap(), "2024-05-08T12:00:00.000Z");
        assert_eq!(parse_at("now-7d", now).unwrap(), "2024-05-01T12:00:00.000Z");
        assert_eq!(parse_at("-36h", now).unwrap(), "2024-05-07T00:00:00.000Z");
        assert_eq!(
            parse_at("now-90m", now).unwrap(),
            "2024-05-08T10:30:00.000Z"
        );
        assert_eq!(
            parse_at("2024-05-01T02:00:00+02:00", now).unwrap(),
            "2024-05-01T00:00:00.000Z"
        );
        assert!(parse_at("now-7w", now).is_err());
        assert!(parse_at("yesterday", now).is_err());
    }
}
