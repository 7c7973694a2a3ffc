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
    /// Each account's caps unless an operator set its own (`ACCOUNT_MAX_INTEGRATIONS`,
    /// `ACCOUNT_MAX_SUBSCRIPTIONS`, `ACCOUNT_MAX_LIVE_TOKENS`,
    /// `ACCOUNT_MAX_REQUESTS_PER_SECOND`; the template's `AccountMax…`
    /// parameters). See [`crate::store::account_limits`].
    pub account_limits: AccountLimits,
    /// The secret holding the token-check key (`TOKEN_CHECK_KEY_ARN`, the api function's only;
    /// see [`crate::operations::account::token_format`]).
    pub token_check_key_arn: Option<String>,
}

/// How many integrations, subscriptions and live tokens an account may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AccountLimits {
    pub integrations: u32,
    pub subscriptions: u32,
    pub live_tokens: u32,
    /// Requests per second one account's credentials may make of the API
    /// ([`crate::web::account_rate`]).
    pub requests_per_second: u32,
}

/// The caps of a deployment that sets none (the template's defaults).
pub const DEFAULT_ACCOUNT_LIMITS: AccountLimits = AccountLimits {
    integrations: 50,
    subscriptions: 200,
    live_tokens: 50,
    requests_per_second: 50,
};

/// The daily recipient quota of a deployment that does not set one.
pub(crate) const DEFAULT_NOTICE_DAILY_RECIPIENT_QUOTA: u32 = 200;

impl Config {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_map(map: &BTreeMap<String, String>) -> Result<Self, ConfigError> {
        Self::from_lookup(|name| map.get(name).cloned())
    }

    pub(crate) fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
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
        let count = |name: &'static str, default: u32, expected: &'static str| match lookup(name) {
            None => Ok(default),
            Some(v) => v.trim().parse().map_err(|_| ConfigError::Invalid {
                name,
                value: v.clone(),
                expected,
            }),
        };
        let notice_daily_recipient_quota = count(
            "NOTICE_DAILY_RECIPIENT_QUOTA",
            DEFAULT_NOTICE_DAILY_RECIPIENT_QUOTA,
            "a whole number of recipients",
        )?;
        let d = DEFAULT_ACCOUNT_LIMITS;
        let account_limits = AccountLimits {
            integrations: count(
                "ACCOUNT_MAX_INTEGRATIONS",
                d.integrations,
                "a whole number of integrations",
            )?,
            subscriptions: count(
                "ACCOUNT_MAX_SUBSCRIPTIONS",
                d.subscriptions,
                "a whole number of subscriptions",
            )?,
            live_tokens: count(
                "ACCOUNT_MAX_LIVE_TOKENS",
                d.live_tokens,
                "a whole number of tokens",
            )?,
            requests_per_second: count(
                "ACCOUNT_MAX_REQUESTS_PER_SECOND",
                d.requests_per_second,
                "a whole number of requests per second",
            )?,
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
            account_limits,
            token_check_key_arn: lookup("TOKEN_CHECK_KEY_ARN").filter(|a| !a.is_empty()),
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
    fn reads_the_account_limits_and_defaults_them_to_the_templates() {
        assert_eq!(
            Config::from_map(&full()).unwrap().account_limits,
            DEFAULT_ACCOUNT_LIMITS
        );
        let mut m = full();
        m.insert("ACCOUNT_MAX_INTEGRATIONS".into(), "3".into());
        m.insert("ACCOUNT_MAX_LIVE_TOKENS".into(), "7".into());
        m.insert("ACCOUNT_MAX_REQUESTS_PER_SECOND".into(), "9".into());
        let limits = Config::from_map(&m).unwrap().account_limits;
        assert_eq!(
            (
                limits.integrations,
                limits.subscriptions,
                limits.live_tokens,
                limits.requests_per_second
            ),
            (3, 200, 7, 9)
        );
        m.insert("ACCOUNT_MAX_SUBSCRIPTIONS".into(), "many".into());
        assert!(matches!(
            Config::from_map(&m),
            Err(ConfigError::Invalid {
                name: "ACCOUNT_MAX_SUBSCRIPTIONS",
                ..
            })
        ));
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
