//! `make chaos CHANGES=N SEED=S`: the chaos scenario (`local::chaos`) on the local emulator,
//! large, in waves; prints its summary line and writes the JSON report.
//!
//!   chaos [--changes N] [--seed S] [--subscriptions K] [--wave N] [--report PATH]

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
    #[arg(long, default_value = "target/chaos-report.json")]
    report: std::path::PathBuf,
}

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error,local=info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let mut config = ChaosConfig::new(args.changes, args.seed);
    config.subscriptions = args.subscriptions;
    config.wave_changes = args.wave;
    let report = run(&config).await?;
    if let Some(dir) = args.report.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&args.report, serde_json::to_string_pretty(&report)?)?;
    println!("{}", report.summary());
    for example in &report.figures.examples {
        println!("  {example}");
    }
    println!("report: {}", args.report.display());
    anyhow::ensure!(report.defects() == 0, "the chaos run found defects");
    Ok(())
}
