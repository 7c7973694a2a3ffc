//! What every function's `main` does before it serves: JSON logs and its clients and configuration.

use crate::aws::Clients;
use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use std::sync::Arc;

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
