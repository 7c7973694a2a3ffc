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

/// JSON logs (CloudWatch reads them as structured events), level from `RUST_LOG` (default info).
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_current_span(false)
        .without_time() // Lambda stamps every line.
        .with_target(false)
        .try_init();
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

#[cfg(test)]
mod tests {
    use super::*;
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
}
