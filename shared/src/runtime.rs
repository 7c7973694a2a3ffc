//! What every function's `main` does before it serves: JSON logs and its clients and configuration.

use crate::aws::Clients;
use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

/// The invocation's deadline (Lambda's `lambda-runtime-deadline-ms`) as an instant of this host's
/// monotonic clock; now when it has passed.
pub fn deadline_of(context: &lambda_runtime::Context) -> Instant {
    let left = context
        .deadline()
        .duration_since(SystemTime::now())
        .unwrap_or_default();
    Instant::now() + left
}

/// The environment variable naming the functions' log level (the template's `LogLevel`
/// parameter: `TRACE`, `DEBUG`, `INFO`, `WARN` or `ERROR`).
pub const LOG_LEVEL_VAR: &str = "LOG_LEVEL";

/// The level when neither `LOG_LEVEL` nor `RUST_LOG` names one (the template's default too).
pub const DEFAULT_LOG_LEVEL: &str = "INFO";

/// The functions' log filter: `RUST_LOG` when set (a directive list, for local runs), else the
/// level `LOG_LEVEL` names, else [`DEFAULT_LOG_LEVEL`].
pub(crate) fn log_filter() -> tracing_subscriber::EnvFilter {
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_default_env() {
        return filter;
    }
    let level = std::env::var(LOG_LEVEL_VAR).unwrap_or_else(|_| DEFAULT_LOG_LEVEL.to_owned());
    level_filter(&level)
}

/// The filter of one level's name (any case); an unknown name is the default level.
pub fn level_filter(level: &str) -> tracing_subscriber::EnvFilter {
    let level = level.trim().to_ascii_lowercase();
    tracing_subscriber::EnvFilter::try_new(&level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_LEVEL.to_lowercase()))
}

/// The functions' log lines, one JSON object each (CloudWatch reads them as structured events,
/// and Lambda filters them by their `level`), written to `writer`: without a time (Lambda stamps
/// every line), a target or spans. What `init_tracing` installs, and what the bench counts and
/// the tests read.
pub fn json_logs<W>(
    writer: W,
    filter: tracing_subscriber::EnvFilter,
) -> impl tracing::Subscriber + Send + Sync + 'static
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_current_span(false)
        .with_span_list(false)
        .without_time()
        .with_target(false)
        .with_writer(writer)
        .finish()
}

/// JSON logs on standard output at the level of [`log_filter`].
pub(crate) fn init_tracing() {
    use tracing_subscriber::util::SubscriberInitExt;
    let _ = json_logs(std::io::stdout, log_filter()).try_init();
}

/// Everything a handler is built from, read once per container.
pub struct Context {
    pub clients: Clients,
    pub config: Config,
    pub clock: Arc<dyn Clock>,
}

impl Context {
    pub async fn from_env() -> Result<Self, lambda_runtime::Error> {
        init_tracing();
        let config = Config::from_env()?;
        let clients = Clients::from_env().await;
        Ok(Context {
            clients,
            config,
            clock: Arc::new(SystemClock),
        })
    }
}

/// How a stream record is named in `batchItemFailures` and logs: its `SequenceNumber`, or when a
/// record has none (Lambda's contract wants it; a record without it cannot be checkpointed), its
/// `eventID` so the failure is still traceable. An identifier that is not a sequence number of
/// the batch makes Lambda retry the whole batch, which is the safe reading of such a record.
pub(crate) fn stream_record_id(record: &aws_lambda_events::event::dynamodb::EventRecord) -> String {
    match record.change.sequence_number.as_deref() {
        Some(seq) if !seq.is_empty() => seq.to_owned(),
        _ => {
            let id = if record.event_id.is_empty() {
                "unknown".to_owned()
            } else {
                format!("event:{}", record.event_id)
            };
            tracing::warn!(record = %id, "stream record without a SequenceNumber");
            id
        }
    }
}

/// A batch-item failure for the stream record named `id` ([`stream_record_id`]).
pub(crate) fn stream_failure(
    id: String,
) -> aws_lambda_events::event::streams::DynamoDbBatchItemFailure {
    let mut f = aws_lambda_events::event::streams::DynamoDbBatchItemFailure::default();
    f.item_identifier = Some(id);
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lambda_events::event::dynamodb::EventRecord;
    use std::time::{Duration, UNIX_EPOCH};

    fn context_ending_at(at: SystemTime) -> lambda_runtime::Context {
        let mut context = lambda_runtime::Context::default();
        context.deadline = at.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
        context
    }

    #[test]
    fn the_invocation_deadline_becomes_an_instant_as_far_ahead() {
        let ahead = deadline_of(&context_ending_at(
            SystemTime::now() + Duration::from_secs(20),
        ));
        let left = ahead - Instant::now();
        assert!(
            left > Duration::from_secs(19) && left <= Duration::from_secs(20),
            "{left:?}"
        );
        let passed = deadline_of(&context_ending_at(
            SystemTime::now() - Duration::from_secs(5),
        ));
        assert!(passed <= Instant::now());
    }

    #[test]
    fn a_stream_record_without_a_sequence_number_is_named_by_its_event_id() {
        let mut r = EventRecord::default();
        r.event_id = "e-1".into();
        assert_eq!(stream_record_id(&r), "event:e-1");
        r.change.sequence_number = Some(String::new());
        assert_eq!(stream_record_id(&r), "event:e-1");
        r.change.sequence_number = Some("42".into());
        assert_eq!(stream_record_id(&r), "42");
        assert_eq!(
            stream_failure("42".into()).item_identifier.as_deref(),
            Some("42")
        );
    }
}
