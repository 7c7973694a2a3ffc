//! `rhythm`: the operator's command line for Rhythm delivery, for people who live in a terminal.
//! It calls the HTTP API's `/operator` routes with an operator token (`--token` or
//! `RHYTHM_OPERATOR_TOKEN`) at `--api-url` (or `RHYTHM_API_URL`; default the local API server):
//!
//! ```text
//! rhythm retry   --account A --subscription S --change C --reason "…"
//! rhythm replay  start  --account A --subscription S --from now-7d --to now --reason "…"
//! rhythm replay  status --account A JOB
//! rhythm replay  resume --account A JOB --reason "…"
//! rhythm replay  list   --account A [--subscription S]
//! rhythm resume  --account A --subscription S --reason "…"
//! rhythm history subscription --account A --subscription S
//! rhythm history deliveries   --account A --subscription S [--status dead,failed] [--from …] [--to …]
//! rhythm history attempts     --account A --subscription S --change C
//! rhythm history audit        --account A [--subscription S]
//! rhythm audit verify         --account A [--anchor SEQ:HASH]   (exit 1: an entry was replaced or removed)
//! ```
//!
//! Times are RFC 3339 (`2024-05-01T00:00:00Z`), `now`, or relative to now (`now-7d`, `-36h`;
//! units `s`, `m`, `h`, `d`). Output is a short summary; `--json` prints the API's JSON instead.
//! A refused request prints the API's problem document and exits 1; a usage error exits 2.

mod client;
mod commands;
mod output;
mod subscription_args;
mod time_arg;

use anyhow::Result;
use clap::{Parser, Subcommand};
use client::{Client, Refusal};
use commands::{audit, history, replay, resume, retry};
use output::Output;
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "rhythm",
    about = "Operator actions on Rhythm delivery: retry, replay, resume, history and audit checks",
    version
)]
struct Cli {
    /// Base URL of the HTTP API (with the stage in AWS, e.g. https://…/prod).
    #[arg(
        long,
        env = "RHYTHM_API_URL",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    api_url: String,
    /// Operator bearer token (a JWT in AWS; the local operator token locally).
    #[arg(long, env = "RHYTHM_OPERATOR_TOKEN", hide_env_values = true)]
    token: String,
    /// Print the API's JSON responses instead of summaries.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Restart one delivery from its first attempt (dead, failed, retrying or delivered).
    Retry(retry::RetryArgs),
    /// Replay a window (at most seven days) of a subscription's deliveries.
    #[command(subcommand)]
    Replay(replay::ReplayCommand),
    /// Resume a paused subscription (its dead count resets).
    Resume(resume::ResumeArgs),
    /// Integration history: a subscription, its deliveries, a delivery's attempts, the audit.
    #[command(subcommand)]
    History(history::HistoryCommand),
    /// Audit history checks: `verify` walks a history's hash chain.
    #[command(subcommand)]
    Audit(audit::AuditCommand),
}

async fn run(cli: Cli) -> Result<()> {
    let client = Client::new(&cli.api_url, cli.token)?;
    let output = Output::new(cli.json);
    match cli.command {
        Command::Retry(args) => retry::run(&client, &output, args).await,
        Command::Replay(command) => replay::run(&client, &output, command).await,
        Command::Resume(args) => resume::run(&client, &output, args).await,
        Command::History(command) => history::run(&client, &output, command).await,
        Command::Audit(command) => audit::run(&client, &output, command).await,
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // A refusal is the API's own answer and says all; any other failure (the URL, the
            // connection) prints its chain of causes.
            if e.downcast_ref::<Refusal>().is_some() {
                eprintln!("rhythm: refused: {e}");
            } else {
                eprintln!("rhythm: {e:#}");
            }
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use commands::replay::ReplayCommand;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("rhythm").chain(args.iter().copied()))
    }

    #[test]
    fn parses_every_command() {
        let cli = parse(&[
            "--token",
            "t",
            "retry",
            "--account",
            "a",
            "--subscription",
            "s",
            "--change",
            "c",
            "--reason",
            "why",
        ])
        .unwrap();
        assert!(matches!(cli.command, Command::Retry(ref retry) if retry.change == "c"));
        assert_eq!(cli.api_url, "http://127.0.0.1:8080");
        let cli = parse(&[
            "--token",
            "t",
            "--api-url",
            "https://x/prod",
            "replay",
            "start",
            "--account",
            "a",
            "--subscription",
            "s",
            "--from",
            "2024-05-01T00:00:00Z",
            "--to",
            "2024-05-08T00:00:00+00:00",
            "--reason",
            "r",
        ])
        .unwrap();
        let Command::Replay(ReplayCommand::Start { from, to, .. }) = cli.command else {
            panic!()
        };
        assert_eq!(from, "2024-05-01T00:00:00.000Z");
        assert_eq!(to, "2024-05-08T00:00:00.000Z");
        assert!(parse(&["--token", "t", "replay", "status", "--account", "a", "JOB"]).is_ok());
        assert!(parse(&[
            "--token",
            "t",
            "replay",
            "resume",
            "--account",
            "a",
            "JOB",
            "--reason",
            "r"
        ])
        .is_ok());
        assert!(parse(&[
            "--token",
            "t",
            "resume",
            "--account",
            "a",
            "--subscription",
            "s",
            "--reason",
            "r"
        ])
        .is_ok());
        assert!(parse(&[
            "--token",
            "t",
            "--json",
            "history",
            "deliveries",
            "--account",
            "a",
            "--subscription",
            "s",
            "--status",
            "dead"
        ])
        .is_ok());
        assert!(parse(&["--token", "t", "history", "audit", "--account", "a"]).is_ok());
        assert!(parse(&[
            "--token",
            "t",
            "history",
            "attempts",
            "--account",
            "a",
            "--subscription",
            "s",
            "--change",
            "c"
        ])
        .is_ok());
    }

    #[test]
    fn refuses_missing_and_malformed_arguments() {
        let e = parse(&[
            "retry",
            "--account",
            "a",
            "--subscription",
            "s",
            "--change",
            "c",
            "--reason",
            "r",
        ])
        .unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::MissingRequiredArgument);
        let e = parse(&[
            "--token",
            "t",
            "retry",
            "--account",
            "a",
            "--subscription",
            "s",
            "--change",
            "c",
        ])
        .unwrap_err();
        assert!(e.to_string().contains("--reason"));
        let e = parse(&[
            "--token",
            "t",
            "replay",
            "start",
            "--account",
            "a",
            "--subscription",
            "s",
            "--from",
            "last week",
            "--to",
            "now",
            "--reason",
            "r",
        ])
        .unwrap_err();
        assert!(e.to_string().contains("not a time"));
    }
}
