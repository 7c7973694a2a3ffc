//! The terminal-failure metric, in CloudWatch embedded metric format: one JSON object per line on
//! standard output, which CloudWatch Logs turns into the `RhythmDelivery/NotificationTerminalFailures`
//! metric (dimension `Stage`) the template's `NotificationTerminalFailureAlarm` watches. Written
//! directly to stdout (not through `tracing`, whose JSON wraps fields) so the line is exactly the
//! EMF document.

use crate::domain::time::Timestamp;
use serde_json::{json, Value};
use std::io::Write;
use std::sync::{Arc, Mutex};

pub const NAMESPACE: &str = "RhythmDelivery";
pub const TERMINAL_FAILURES: &str = "NotificationTerminalFailures";

/// One terminal failure of a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalFailure {
    pub stage: String,
    pub channel: String,
    /// `provider`, `attempts_exhausted` or `ambiguous`.
    pub reason: String,
    pub notice_id: String,
    pub delivery_key: String,
    pub at: Timestamp,
}

/// The EMF document of one terminal failure. `Stage` is the only dimension (the alarm's); the
/// channel, reason and ids are properties, searchable in Logs Insights.
pub fn emf_document(f: &TerminalFailure) -> Value {
    json!({
        "_aws": {
            "Timestamp": f.at.millis(),
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": [["Stage"]],
                "Metrics": [{"Name": TERMINAL_FAILURES, "Unit": "Count"}],
            }],
        },
        "Stage": f.stage,
        TERMINAL_FAILURES: 1,
        "channel": f.channel,
        "reason": f.reason,
        "notice_id": f.notice_id,
        "delivery_key": f.delivery_key,
    })
}

/// Where metrics go: standard output in Lambda, a buffer in tests.
pub trait MetricSink: Send + Sync {
    fn terminal_failure(&self, failure: &TerminalFailure);
}

/// Writes EMF lines to standard output.
#[derive(Debug, Default, Clone, Copy)]
pub struct StdoutEmf;

impl MetricSink for StdoutEmf {
    fn terminal_failure(&self, failure: &TerminalFailure) {
        let line = emf_document(failure).to_string();
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
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
        let doc = emf_document(&TerminalFailure {
            stage: "prod".into(),
            channel: "email".into(),
            reason: "attempts_exhausted".into(),
            notice_id: "n".into(),
            delivery_key: "email-0".into(),
            at: Timestamp(1_700_000_000_000),
        });
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
            notice_id: "n".into(),
            delivery_key: "k".into(),
            at: Timestamp(0),
        });
        assert_eq!(sink.failures().len(), 1);
    }
}
