//! Function configuration, read from the environment the template gives every function.

use std::collections::BTreeMap;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error(
        "environment variable {0} is not set (template.yaml Globals.Function.Environment sets it)"
    )]
    Missing(&'static str),
    #[error("environment variable {name} has an invalid value {value:?}: expected {expected}")]
    Invalid {
        name: &'static str,
        value: String,
        expected: &'static str,
    },
}

/// Names of the resources a function works with, and deployment switches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub stage: String,
    pub changes_table: String,
    pub delivery_table: String,
    pub notification_table: String,
    pub delivery_queue_url: String,
    pub notification_queue_url: String,
    /// Lets webhook targets resolve to private/loopback addresses. Off in AWS (the SSRF guard);
    /// the local demo and tests turn it on to reach receivers on loopback.
    pub allow_private_targets: bool,
    pub notification_sender: String,
    /// The KMS key that wraps the data keys sealing webhook signing secrets (`SIGNING_KEY_ID`).
    pub signing_key_id: String,
    /// CloudWatch namespace of the embedded metrics (`METRICS_NAMESPACE`, default
    /// [`crate::metrics::DEFAULT_NAMESPACE`]).
    pub metrics_namespace: String,
    /// Outbound recipients an account's notices may name per UTC day
    /// (`NOTICE_DAILY_RECIPIENT_QUOTA`, default [`DEFAULT_NOTICE_DAILY_RECIPIENT_QUOTA`]; the
    /// template's `NoticeDailyRecipientQuota`). See [`crate::notify::bounds`].
    pub notice_daily_recipient_quota: u32,
}

/// The daily recipient quota of a deployment that does not set one.
pub const DEFAULT_NOTICE_DAILY_RECIPIENT_QUOTA: u32 = 200;

impl Config {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_map(map: &BTreeMap<String, String>) -> Result<Self, ConfigError> {
        Self::from_lookup(|name| map.get(name).cloned())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let required = |name: &'static str| lookup(name).ok_or(ConfigError::Missing(name));
        let allow_private_targets = match lookup("ALLOW_PRIVATE_TARGETS").as_deref() {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                return Err(ConfigError::Invalid {
                    name: "ALLOW_PRIVATE_TARGETS",
                    value: other.to_string(),
                    expected: "true or false",
                })
            }
        };
        let notice_daily_recipient_quota = match lookup("NOTICE_DAILY_RECIPIENT_QUOTA") {
            None => DEFAULT_NOTICE_DAILY_RECIPIENT_QUOTA,
            Some(v) => v.trim().parse().map_err(|_| ConfigError::Invalid {
                name: "NOTICE_DAILY_RECIPIENT_QUOTA",
                value: v.clone(),
                expected: "a whole number of recipients",
            })?,
        };
        Ok(Config {
            stage: lookup("RHYTHM_STAGE").unwrap_or_else(|| "local".into()),
            changes_table: required("CHANGES_TABLE")?,
            delivery_table: required("DELIVERY_TABLE")?,
            notification_table: required("NOTIFICATION_TABLE")?,
            delivery_queue_url: required("DELIVERY_QUEUE_URL")?,
            notification_queue_url: required("NOTIFICATION_QUEUE_URL")?,
            allow_private_targets,
            notification_sender: lookup("NOTIFICATION_SENDER")
                .unwrap_or_else(|| "notifications@example.com".into()),
            signing_key_id: required("SIGNING_KEY_ID")?,
            metrics_namespace: lookup("METRICS_NAMESPACE")
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| crate::metrics::DEFAULT_NAMESPACE.into()),
            notice_daily_recipient_quota,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> BTreeMap<String, String> {
        [
            ("CHANGES_TABLE", "c"),
            ("DELIVERY_TABLE", "d"),
            ("NOTIFICATION_TABLE", "n"),
            ("DELIVERY_QUEUE_URL", "http://q/d"),
            ("NOTIFICATION_QUEUE_URL", "http://q/n"),
            ("SIGNING_KEY_ID", "k"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    #[test]
    fn reads_every_name_and_defaults_the_ssrf_guard_on() {
        let c = Config::from_map(&full()).unwrap();
        assert_eq!(c.delivery_table, "d");
        assert!(!c.allow_private_targets);
        assert_eq!(c.metrics_namespace, "RhythmDelivery");
        let mut m = full();
        m.insert("METRICS_NAMESPACE".into(), "Rhythm/staging".into());
        assert_eq!(
            Config::from_map(&m).unwrap().metrics_namespace,
            "Rhythm/staging"
        );
    }

    #[test]
    fn names_the_missing_variable() {
        let mut m = full();
        m.remove("DELIVERY_TABLE");
        assert_eq!(
            Config::from_map(&m),
            Err(ConfigError::Missing("DELIVERY_TABLE"))
        );
    }

    #[test]
    fn reads_the_daily_recipient_quota_and_defaults_it_modestly() {
        assert_eq!(
            Config::from_map(&full())
                .unwrap()
                .notice_daily_recipient_quota,
            DEFAULT_NOTICE_DAILY_RECIPIENT_QUOTA
        );
        let mut m = full();
        m.insert("NOTICE_DAILY_RECIPIENT_QUOTA".into(), "25".into());
        assert_eq!(
            Config::from_map(&m).unwrap().notice_daily_recipient_quota,
            25
        );
        m.insert("NOTICE_DAILY_RECIPIENT_QUOTA".into(), "-1".into());
        assert!(matches!(
            Config::from_map(&m),
            Err(ConfigError::Invalid {
                name: "NOTICE_DAILY_RECIPIENT_QUOTA",
                ..
            })
        ));
    }

    #[test]
    fn refuses_an_unclear_switch() {
        let mut m = full();
        m.insert("ALLOW_PRIVATE_TARGETS".into(), "yes".into());
        assert!(matches!(
            Config::from_map(&m),
            Err(ConfigError::Invalid { .. })
        ));
    }
}
