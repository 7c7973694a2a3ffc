//! The terminal-failure metric: one EMF document ([`crate::metrics`]) per terminal failure, which
//! CloudWatch Logs turns into the `NotificationTerminalFailures` metric (namespace
//! `METRICS_NAMESPACE`, dimension `Stage`) the template's `NotificationTerminalFailureAlarm`
//! watches.

use crate::domain::time::Timestamp;
use crate::ids::NoticeId;
use crate::metrics::{document, write_line, Metric};
use serde_json::{json, Map, Value};
use std::sync::{Arc, Mutex};

pub(crate) const TERMINAL_FAILURES: &str = "NotificationTerminalFailures";

/// One terminal failure of a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalFailure {
    pub stage: String,
    pub channel: String,
    /// `provider`, `attempts_exhausted` or `ambiguous`.
    pub reason: String,
    pub notice_id: NoticeId,
    pub delivery_key: String,
    pub at: Timestamp,
}

/// The EMF document of one terminal failure. `Stage` is the only dimension (the alarm's); the
/// channel, reason and ids are properties, searchable in Logs Insights.
pub fn emf_document(f: &TerminalFailure, namespace: &str) -> Value {
    let mut props = Map::new();
    props.insert("channel".into(), json!(f.channel));
    props.insert("reason".into(), json!(f.reason));
    props.insert("notice_id".into(), json!(f.notice_id));
    props.insert("delivery_key".into(), json!(f.delivery_key));
    document(
        namespace,
        &f.stage,
        f.at,
        &[Metric::count(TERMINAL_FAILURES, 1)],
        props,
    )
}

/// Where metrics go: standard output in Lambda, a buffer in tests.
pub trait MetricSink: Send + Sync {
    fn terminal_failure(&self, failure: &TerminalFailure);
}

/// Writes EMF lines to standard output, in the deployment's metric namespace.
#[derive(Debug, Clone)]
pub(crate) struct StdoutEmf {
    pub namespace: String,
}

impl StdoutEmf {
    pub fn new(namespace: &str) -> Self {
        StdoutEmf {
            namespace: namespace.to_owned(),
        }
    }
}

impl MetricSink for StdoutEmf {
    fn terminal_failure(&self, failure: &TerminalFailure) {
        write_line(&emf_document(failure, &self.namespace));
    }
}

/// Keeps the failures (tests, the local demo).
#[derive(Debug, Default, Clone)]
pub struct CapturedMetrics(pub Arc<Mutex<Vec<TerminalFailure>>>);

impl CapturedMetrics {
    pub fn failures(&self) -> Vec<TerminalFailure> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl MetricSink for CapturedMetrics {
    fn terminal_failure(&self, failure: &TerminalFailure) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(failure.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_matches_the_alarm() {
        let doc = emf_document(
            &TerminalFailure {
                stage: "prod".into(),
                channel: "email".into(),
                reason: "attempts_exhausted".into(),
                notice_id: "n".parse().unwrap(),
                delivery_key: "email-0".into(),
                at: Timestamp(1_700_000_000_000),
            },
            crate::metrics::DEFAULT_NAMESPACE,
        );
        let m = &doc["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(m["Namespace"], "RhythmDelivery");
        assert_eq!(m["Dimensions"], json!([["Stage"]]));
        assert_eq!(m["Metrics"][0]["Name"], "NotificationTerminalFailures");
        assert_eq!(doc["Stage"], "prod");
        assert_eq!(doc["NotificationTerminalFailures"], 1);
        assert_eq!(doc["_aws"]["Timestamp"], 1_700_000_000_000i64);
        let sink = CapturedMetrics::default();
        sink.terminal_failure(&TerminalFailure {
            stage: "s".into(),
            channel: "c".into(),
            reason: "r".into(),
            notice_id: "n".parse().unwrap(),
            delivery_key: "k".into(),
            at: Timestamp(0),
        });
        assert_eq!(sink.failures().len(), 1);
    }
}
