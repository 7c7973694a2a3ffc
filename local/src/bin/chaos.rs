//! `make chaos CHANGES=N SEED=S`: the chaos scenario (`local::chaos`) on the local emulator,
//! large, in waves; prints its summary line and writes the JSON report.
//!
//!   chaos [--changes N] [--seed S] [--subscriptions K] [--wave N] [--attempt-timeout-ms MS]
//!         [--report PATH]

use anyhow::Result;
use clap::Parser;
use local::chaos::{run, ChaosConfig};

#[derive(Parser)]
struct Args {
    #[arg(long, default_value_t = 5000)]
    changes: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long, default_value_t = 3)]
    subscriptions: usize,
    /// Changes per wave, each on a fresh stack.
    #[arg(long, default_value_t = 500)]
    wave: usize,
    /// Changes written between two pumps.
    #[arg(long, default_value_t = 50)]
    round: usize,
    /// The worker's attempt timeout in milliseconds (hangs last three times this). On a loaded
    /// machine an answer can take longer than the default to reach the worker, which then
    /// records a timeout for a request its endpoint answered (RELIABILITY.md, "Defects found").
    #[arg(long)]
    attempt_timeout_ms: Option<u64>,
    #[arg(long, default_value = "target/chaos-report.json")]
    report: std::path::PathBuf,
}

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                // A lost response has no connection to poison; the SDK says so at error level.
                tracing_subscriber::EnvFilter::new(
                    "error,local=info,aws_smithy_runtime::client::http::connection_poisoning=off",
                )
            }),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let mut config = ChaosConfig::new(args.changes, args.seed);
    config.subscriptions = args.subscriptions;
    config.wave_changes = args.wave;
    config.round_changes = args.round;
    if let Some(ms) = args.attempt_timeout_ms {
        config.attempt_timeout = std::time::Duration::from_millis(ms);
    }
    if let Some(dir) = args.report.parent() {
        std::fs::create_dir_all(dir)?;
    }
    // The report is rewritten after every wave: a run stopped early keeps its completed waves.
    let write = |report: &local::chaos::ChaosReport| {
        if let Ok(text) = serde_json::to_string_pretty(report) {
            let _ = std::fs::write(&args.report, text);
        }
    };
    let report = run(&config, write).await?;
    println!("{}", report.summary());
    for example in &report.figures.examples {
        println!("  {example}");
    }
    println!("report: {}", args.report.display());
    anyhow::ensure!(report.defects() == 0, "the chaos run found defects");
    Ok(())
}
