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
//! ```
//!
//! Times are RFC 3339 (`2024-05-01T00:00:00Z`), `now`, or relative to now (`now-7d`, `-36h`;
//! units `s`, `m`, `h`, `d`). Output is a short summary; `--json` prints the API's JSON instead.
//! A refused request prints the API's problem document and exits 1; a usage error exits 2.

mod client;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};
use client::{Client, DeliveryFilter, Page, Refusal};
use serde_json::Value;
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "rhythm",
    about = "Operator actions on Rhythm delivery: retry, replay, resume and history",
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
    Retry {
        #[command(flatten)]
        at: SubscriptionArgs,
        /// The change id of the delivery.
        #[arg(long)]
        change: String,
        /// Why (kept in the audit history).
        #[arg(long)]
        reason: String,
    },
    /// Replay a window (at most seven days) of a subscription's deliveries.
    #[command(subcommand)]
    Replay(ReplayCommand),
    /// Resume a paused subscription (its dead count resets).
    Resume {
        #[command(flatten)]
        at: SubscriptionArgs,
        /// Why (kept in the audit history).
        #[arg(long)]
        reason: String,
    },
    /// Integration history: a subscription, its deliveries, a delivery's attempts, the audit.
    #[command(subcommand)]
    History(HistoryCommand),
}

#[derive(Debug, Args)]
struct SubscriptionArgs {
    #[arg(long)]
    account: String,
    #[arg(long)]
    subscription: String,
}

#[derive(Debug, Subcommand)]
enum ReplayCommand {
    /// Start a replay job for the window [from, to) of change time.
    Start {
        #[command(flatten)]
        at: SubscriptionArgs,
        /// Start of the window: RFC 3339, `now` or `now-7d`.
        #[arg(long, value_parser = parse_when)]
        from: String,
        /// End of the window (exclusive).
        #[arg(long, value_parser = parse_when)]
        to: String,
        #[arg(long)]
        reason: String,
    },
    /// A job's status and counts.
    Status {
        #[arg(long)]
        account: String,
        job: String,
    },
    /// Continue a job that stopped (a timeout, a time budget).
    Resume {
        #[arg(long)]
        account: String,
        job: String,
        #[arg(long)]
        reason: String,
    },
    /// The account's jobs, newest first.
    List {
        #[arg(long)]
        account: String,
        #[arg(long)]
        subscription: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum HistoryCommand {
    /// A subscription's status, dead count and pull cursor.
    Subscription {
        #[command(flatten)]
        at: SubscriptionArgs,
    },
    /// Deliveries by status and change time, newest first.
    Deliveries {
        #[command(flatten)]
        at: SubscriptionArgs,
        /// Comma-separated statuses, e.g. `dead,failed`.
        #[arg(long)]
        status: Option<String>,
        #[arg(long, value_parser = parse_when)]
        from: Option<String>,
        #[arg(long, value_parser = parse_when)]
        to: Option<String>,
        #[arg(long)]
        limit: Option<u32>,
        #[arg(long)]
        cursor: Option<String>,
    },
    /// A delivery's attempts, by run (each retry starts a run).
    Attempts {
        #[command(flatten)]
        at: SubscriptionArgs,
        #[arg(long)]
        change: String,
    },
    /// Who did what, when and why.
    Audit {
        #[arg(long)]
        account: String,
        #[arg(long)]
        subscription: Option<String>,
        #[arg(long)]
        limit: Option<u32>,
        #[arg(long)]
        cursor: Option<String>,
    },
}

/// An instant as RFC 3339: RFC 3339 itself, `now`, or `now-7d` / `-7d` (units s, m, h, d).
fn parse_when(text: &str) -> Result<String, String> {
    parse_when_at(text, chrono::Utc::now())
}

fn parse_when_at(text: &str, now: chrono::DateTime<chrono::Utc>) -> Result<String, String> {
    let text = text.trim();
    let rfc =
        |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    if text == "now" {
        return Ok(rfc(now));
    }
    if let Some(rest) = text.strip_prefix("now-").or_else(|| text.strip_prefix('-')) {
        let (digits, unit) = rest.split_at(rest.len().saturating_sub(1));
        let n: i64 = digits
            .parse()
            .map_err(|_| format!("{text:?}: expected e.g. now-7d, -36h, now"))?;
        let seconds = match unit {
            "s" => n,
            "m" => n * 60,
            "h" => n * 3600,
            "d" => n * 86_400,
            _ => return Err(format!("{text:?}: the unit is one of s, m, h, d")),
        };
        return Ok(rfc(now - chrono::Duration::seconds(seconds)));
    }
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| rfc(t.with_timezone(&chrono::Utc)))
        .map_err(|_| {
            format!("{text:?} is not a time: use RFC 3339 (2024-05-01T00:00:00Z), now or now-7d")
        })
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or("-")
}

fn print_job(job: &Value) {
    let c = &job["counts"];
    println!(
        "replay {} of subscription {}: {}{}",
        s(&job["id"]),
        s(&job["subscription_id"]),
        s(&job["status"]),
        if job["in_progress"] == true {
            " (a run is processing it)"
        } else {
            ""
        }
    );
    println!("  window  {} .. {}", s(&job["from"]), s(&job["to"]));
    println!(
        "  counts  in window {}, restarted {}, already pending {}, skipped_filter {}, conflicts {}",
        c["in_window"], c["restarted"], c["already_pending"], c["skipped_filter"], c["conflicts"]
    );
    println!("  by {} — {}", s(&job["requested_by"]), s(&job["reason"]));
    if job["status"] == "running" && job["in_progress"] == false {
        println!(
            "  stopped at {}; continue with: rhythm replay resume --account {} {} --reason \"…\"",
            s(&job["position"]),
            s(&job["account_id"]),
            s(&job["id"])
        );
    }
}

fn print_next(page: &Value) {
    if let Some(next) = page["next_cursor"].as_str() {
        println!("(more: --cursor {next})");
    }
}

async fn run(cli: Cli) -> Result<()> {
    let client = Client::new(&cli.api_url, cli.token)?;
    let out = |value: &Value, human: &dyn Fn(&Value)| {
        if cli.json {
            println!(
                "{}",
                serde_json::to_string_pretty(value).unwrap_or_default()
            );
        } else {
            human(value);
        }
    };
    match cli.command {
        Command::Retry { at, change, reason } => {
            let v = client
                .retry_delivery(&at.account, &at.subscription, &change, &reason)
                .await?;
            out(&v, &|v| {
                println!(
                    "delivery {}: {} → {} (attempts start again at 1; audit {})",
                    s(&v["delivery"]["id"]),
                    s(&v["previous_status"]),
                    s(&v["delivery"]["status"]),
                    s(&v["audit_id"])
                );
            });
        }
        Command::Replay(ReplayCommand::Start {
            at,
            from,
            to,
            reason,
        }) => {
            let v = client
                .create_replay(&at.account, &at.subscription, &from, &to, &reason)
                .await?;
            out(&v, &print_job);
        }
        Command::Replay(ReplayCommand::Status { account, job }) => {
            let v = client.get_replay(&account, &job).await?;
            out(&v, &print_job);
        }
        Command::Replay(ReplayCommand::Resume {
            account,
            job,
            reason,
        }) => {
            let v = client.resume_replay(&account, &job, &reason).await?;
            out(&v, &print_job);
        }
        Command::Replay(ReplayCommand::List {
            account,
            subscription,
        }) => {
            let v = client
                .list_replays(&account, subscription.as_deref())
                .await?;
            out(&v, &|v| {
                for job in v["data"].as_array().into_iter().flatten() {
                    print_job(job);
                }
                print_next(v);
            });
        }
        Command::Resume { at, reason } => {
            let v = client
                .resume_subscription(&at.account, &at.subscription, &reason)
                .await?;
            out(&v, &|v| {
                println!(
                    "subscription {}: paused → {} (dead count {} reset; audit {})",
                    s(&v["subscription"]["id"]),
                    s(&v["subscription"]["status"]),
                    v["dead_count_before"],
                    s(&v["audit_id"])
                );
            });
        }
        Command::History(HistoryCommand::Subscription { at }) => {
            let v = client
                .get_subscription(&at.account, &at.subscription)
                .await?;
            out(&v, &|v| {
                println!(
                    "subscription {} ({}): {}, {} dead in a row",
                    s(&v["id"]),
                    s(&v["integration_id"]),
                    s(&v["status"]),
                    v["consecutive_dead"]
                );
                println!(
                    "  pull cursor {} (epoch {})",
                    v["pull"]["acknowledged_change_id"]
                        .as_str()
                        .unwrap_or("(none)"),
                    v["pull"]["epoch"]
                );
            });
        }
        Command::History(HistoryCommand::Deliveries {
            at,
            status,
            from,
            to,
            limit,
            cursor,
        }) => {
            let filter = DeliveryFilter {
                statuses: status.as_deref(),
                from: from.as_deref(),
                to: to.as_deref(),
            };
            let page = Page {
                limit,
                cursor: cursor.as_deref(),
            };
            let v = client
                .list_deliveries(&at.account, &at.subscription, &filter, &page)
                .await?;
            out(&v, &|v| {
                for d in v["data"].as_array().into_iter().flatten() {
                    println!(
                        "{}  {:<14} attempts {}  restarts {}  occurred {}{}",
                        s(&d["change_id"]),
                        s(&d["status"]),
                        d["attempts"],
                        d["restarts"],
                        s(&d["occurred_at"]),
                        d["last_error"]
                            .as_str()
                            .map(|e| format!("  last error: {e}"))
                            .unwrap_or_default()
                    );
                }
                print_next(v);
            });
        }
        Command::History(HistoryCommand::Attempts { at, change }) => {
            let v = client
                .list_attempts(&at.account, &at.subscription, &change)
                .await?;
            out(&v, &|v| {
                println!(
                    "delivery {}: {} ({} restarts)",
                    s(&v["delivery_id"]),
                    s(&v["status"]),
                    v["restarts"]
                );
                for a in v["data"].as_array().into_iter().flatten() {
                    println!(
                        "  run {} attempt {}  {}  {:<18} {}  {} ms{}",
                        a["run"],
                        a["number"],
                        s(&a["at"]),
                        s(&a["class"]),
                        a["http_status"]
                            .as_u64()
                            .map(|c| c.to_string())
                            .unwrap_or_else(|| "-".into()),
                        a["duration_ms"],
                        a["detail"]
                            .as_str()
                            .map(|d| format!("  {d}"))
                            .unwrap_or_default()
                    );
                }
            });
        }
        Command::History(HistoryCommand::Audit {
            account,
            subscription,
            limit,
            cursor,
        }) => {
            let page = Page {
                limit,
                cursor: cursor.as_deref(),
            };
            let v = match &subscription {
                Some(subscription) => {
                    client
                        .list_subscription_audit(&account, subscription, &page)
                        .await?
                }
                None => client.list_account_audit(&account, &page).await?,
            };
            out(&v, &|v| {
                for e in v["data"].as_array().into_iter().flatten() {
                    let target = e["change_id"]
                        .as_str()
                        .map(|c| format!("change {c}"))
                        .or_else(|| e["job_id"].as_str().map(|j| format!("job {j}")))
                        .unwrap_or_default();
                    println!(
                        "{}  {:<20} {}  subscription {} {}  — {}",
                        s(&e["at"]),
                        s(&e["action"]),
                        s(&e["operator"]),
                        s(&e["subscription_id"]),
                        target,
                        s(&e["reason"])
                    );
                }
                print_next(v);
            });
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
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
    use chrono::TimeZone;

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
        assert!(matches!(cli.command, Command::Retry { ref change, .. } if change == "c"));
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

    #[test]
    fn times_are_rfc3339_now_or_relative() {
        let now = chrono::Utc.with_ymd_and_hms(2024, 5, 8, 12, 0, 0).unwrap();
        assert_eq!(
            parse_when_at("now", now).unwrap(),
            "2024-05-08T12:00:00.000Z"
        );
        assert_eq!(
            parse_when_at("now-7d", now).unwrap(),
            "2024-05-01T12:00:00.000Z"
        );
        assert_eq!(
            parse_when_at("-36h", now).unwrap(),
            "2024-05-07T00:00:00.000Z"
        );
        assert_eq!(
            parse_when_at("now-90m", now).unwrap(),
            "2024-05-08T10:30:00.000Z"
        );
        assert_eq!(
            parse_when_at("2024-05-01T02:00:00+02:00", now).unwrap(),
            "2024-05-01T00:00:00.000Z"
        );
        assert!(parse_when_at("now-7w", now).is_err());
        assert!(parse_when_at("yesterday", now).is_err());
    }
}
