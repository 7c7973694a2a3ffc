//! CloudWatch embedded metric format (EMF): the one place the functions' metric documents are
//! made and written. A document is one JSON object on one line of standard output, which
//! CloudWatch Logs turns into metrics. Written directly to stdout (not through `tracing`, whose
//! JSON wraps fields) so the line is exactly the EMF document. Every document has the dimension
//! set `[["Stage"]]` (the alarms' dimension) and the namespace `METRICS_NAMESPACE`
//! ([`crate::config::Config::metrics_namespace`], default [`DEFAULT_NAMESPACE`]).

use crate::domain::time::Timestamp;
use serde_json::{json, Map, Value};
use std::io::Write;
use std::sync::{Arc, Mutex};

/// The namespace when `METRICS_NAMESPACE` is not set (the template's default too).
pub(crate) const DEFAULT_NAMESPACE: &str = "RhythmDelivery";

/// One metric of a document: its name, unit (`Count`, `Milliseconds`) and value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metric {
    pub name: String,
    pub unit: &'static str,
    pub value: u64,
}

impl Metric {
    pub fn count(name: impl Into<String>, value: u64) -> Self {
        Metric {
            name: name.into(),
            unit: "Count",
            value,
        }
    }
}

/// An EMF document of `metrics` for `stage` at `at`, with `properties` (searchable in Logs
/// Insights, not metrics) alongside.
pub fn document(
    namespace: &str,
    stage: &str,
    at: Timestamp,
    metrics: &[Metric],
    properties: Map<String, Value>,
) -> Value {
    let mut doc = Map::new();
    doc.insert(
        "_aws".into(),
        json!({
            "Timestamp": at.millis(),
            "CloudWatchMetrics": [{
                "Namespace": namespace,
                "Dimensions": [["Stage"]],
                "Metrics": metrics.iter().map(|m| json!({"Name": m.name, "Unit": m.unit}))
                    .collect::<Vec<_>>(),
            }],
        }),
    );
    doc.insert("Stage".into(), json!(stage));
    for m in metrics {
        doc.insert(m.name.clone(), json!(m.value));
    }
    for (k, v) in properties {
        doc.insert(k, v);
    }
    Value::Object(doc)
}

/// Where EMF documents go: standard output in Lambda, a buffer in tests.
pub trait EmfSink: Send + Sync {
    fn emit(&self, doc: &Value);
}

/// Writes each document as one line on standard output.
#[derive(Debug, Default, Clone, Copy)]
pub struct StdoutLines;

impl EmfSink for StdoutLines {
    fn emit(&self, doc: &Value) {
        write_line(doc);
    }
}

/// Writes `doc` as one line on standard output.
pub fn write_line(doc: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{doc}");
    let _ = out.flush();
}

/// Keeps the documents (tests, the local demo).
#[derive(Debug, Default, Clone)]
pub struct CapturedEmf(pub Arc<Mutex<Vec<Value>>>);

impl CapturedEmf {
    pub fn documents(&self) -> Vec<Value> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl EmfSink for CapturedEmf {
    fn emit(&self, doc: &Value) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(doc.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_declares_its_metrics_under_the_stage_dimension() {
        let mut props = Map::new();
        props.insert("run".into(), json!("nightly"));
        let doc = document(
            "Ns",
            "prod",
            Timestamp(7),
            &[
                Metric::count("A", 2),
                Metric {
                    name: "B".into(),
                    unit: "Milliseconds",
                    value: 3,
                },
            ],
            props,
        );
        let m = &doc["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(m["Namespace"], "Ns");
        assert_eq!(m["Dimensions"], json!([["Stage"]]));
        assert_eq!(
            m["Metrics"],
            json!([{"Name": "A", "Unit": "Count"}, {"Name": "B", "Unit": "Milliseconds"}])
        );
        assert_eq!((doc["A"].clone(), doc["B"].clone()), (json!(2), json!(3)));
        assert_eq!(
            (doc["Stage"].clone(), doc["run"].clone()),
            (json!("prod"), json!("nightly"))
        );
        assert_eq!(doc["_aws"]["Timestamp"], 7);
    }
}
