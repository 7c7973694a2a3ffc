//! The functions' log lines as they write them (`shared::runtime::json_logs`, the subscriber
//! their `main` installs), captured instead of written to standard output: the bench counts the
//! bytes each function writes per delivery, the tests read the lines.

use std::future::Future;
use std::sync::{Arc, Mutex};
use tracing::instrument::WithSubscriber;

/// The bytes written by the functions' log subscriber ([`LogCapture::subscriber`]).
#[derive(Clone, Debug, Default)]
pub struct LogCapture(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogCapture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("captured logs").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl LogCapture {
    /// The functions' subscriber at `level` (`INFO`, `DEBUG`, …), writing here.
    pub fn subscriber(&self, level: &str) -> impl tracing::Subscriber + Send + Sync + 'static {
        let writer = self.clone();
        shared::runtime::json_logs(move || writer.clone(), shared::runtime::level_filter(level))
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> usize {
        self.0.lock().expect("captured logs").len()
    }

    /// Forgets what was written.
    pub fn reset(&self) {
        self.0.lock().expect("captured logs").clear();
    }

    /// What was written.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("captured logs")).into_owned()
    }

    /// Each line written, parsed (a line that is not JSON fails the caller's test).
    pub fn lines(&self) -> Vec<serde_json::Value> {
        self.text()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: not JSON: {l}")))
            .collect()
    }
}

/// Runs `f` with the functions' log subscriber at `level` (on whichever thread polls it): its
/// output and what it logged.
pub async fn logged<F: Future>(level: &str, f: F) -> (F::Output, LogCapture) {
    let capture = LogCapture::default();
    let out = f.with_subscriber(capture.subscriber(level)).await;
    (out, capture)
}
