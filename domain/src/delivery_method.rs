//! How a subscriber receives its deliveries.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A subscriber's delivery method. Anything other than `webhook`, `internal` or `poll` is kept
/// verbatim as `Unknown` so the worker can fail the delivery with `unknown delivery method {value}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum DeliveryMethod {
    /// Push over HTTPS.
    Webhook,
    /// A built-in handler in this code base.
    Internal,
    /// Pulled by the adapter through the cursor API.
    Poll,
    /// A value the worker does not know, say `queue`.
    Unknown(String),
}

impl DeliveryMethod {
    pub fn parse(value: &str) -> DeliveryMethod {
        match value {
            "webhook" => DeliveryMethod::Webhook,
            "internal" => DeliveryMethod::Internal,
            "poll" => DeliveryMethod::Poll,
            other => DeliveryMethod::Unknown(other.to_owned()),
        }
    }
    pub fn as_str(&self) -> &str {
        match self {
            DeliveryMethod::Webhook => "webhook",
            DeliveryMethod::Internal => "internal",
            DeliveryMethod::Poll => "poll",
            DeliveryMethod::Unknown(other) => other,
        }
    }
    pub fn is_poll(&self) -> bool {
        matches!(self, DeliveryMethod::Poll)
    }
}

impl From<String> for DeliveryMethod {
    fn from(value: String) -> Self {
        DeliveryMethod::parse(&value)
    }
}

impl From<DeliveryMethod> for String {
    fn from(value: DeliveryMethod) -> Self {
        match value {
            DeliveryMethod::Unknown(other) => other,
            known => known.as_str().to_owned(),
        }
    }
}

impl fmt::Display for DeliveryMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delivery_method_serde() {
        for (text, method) in [
            ("webhook", DeliveryMethod::Webhook),
            ("internal", DeliveryMethod::Internal),
            ("poll", DeliveryMethod::Poll),
            ("queue", DeliveryMethod::Unknown("queue".into())),
        ] {
            assert_eq!(
                serde_json::from_value::<DeliveryMethod>(serde_json::json!(text)).unwrap(),
                method
            );
            assert_eq!(serde_json::to_value(&method).unwrap(), text);
            assert_eq!(method.to_string(), text);
        }
        assert!(DeliveryMethod::Poll.is_poll());
        assert!(!DeliveryMethod::Webhook.is_poll());
    }
}
