//! `rhythm replay`: start, follow, continue and list the replay jobs of a window of deliveries.

use crate::client::Client;
use crate::output::{print_next_cursor, text, Output};
use crate::subscription_args::SubscriptionArgs;
use crate::time_arg;
use anyhow::Result;
use clap::Subcommand;
use serde_json::Value;

#[derive(Debug, Subcommand)]
pub enum ReplayCommand {
    /// Start a replay job for the window [from, to) of change time.
    Start {
        #[command(flatten)]
        at: SubscriptionArgs,
        /// Start of the window: RFC 3339, `now` or `now-7d`.
        #[arg(long, value_parser = time_arg::parse)]
        from: String,
        /// End of the window (exclusive).
        #[arg(long, value_parser = time_arg::parse)]
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

pub async fn run(client: &Client, output: &Output, command: ReplayCommand) -> Result<()> {
    match command {
        ReplayCommand::Start {
            at,
            from,
            to,
            reason,
        } => {
            let job = client
                .create_replay(&at.account, &at.subscription, &from, &to, &reason)
                .await?;
            output.show(&job, print_job);
        }
        ReplayCommand::Status { account, job } => {
            let job = client.get_replay(&account, &job).await?;
            output.show(&job, print_job);
        }
        ReplayCommand::Resume {
            account,
            job,
            reason,
        } => {
            let job = client.resume_replay(&account, &job, &reason).await?;
            output.show(&job, print_job);
        }
        ReplayCommand::List {
            account,
            subscription,
        } => {
            let page = client
                .list_replays(&account, subscription.as_deref())
                .await?;
            output.show(&page, |page| {
                for job in page["data"].as_array().into_iter().flatten() {
                    print_job(job);
                }
                print_next_cursor(page);
            });
        }
    }
    Ok(())
}

/// A job's summary, with the command that continues it if it stopped.
fn print_job(job: &Value) {
    let counts = &job["counts"];
    println!(
        "replay {} of subscription {}: {}{}",
        text(&job["id"]),
        text(&job["subscription_id"]),
        text(&job["status"]),
        if job["in_progress"] == true {
            " (a run is processing it)"
        } else {
            ""
        }
    );
    println!("  window  {} .. {}", text(&job["from"]), text(&job["to"]));
    println!(
        "  counts  in window {}, restarted {}, already pending {}, skipped_filter {}, conflicts {}",
        counts["in_window"],
        counts["restarted"],
        counts["already_pending"],
        counts["skipped_filter"],
        counts["conflicts"]
    );
    println!(
        "  by {} — {}",
        text(&job["requested_by"]),
        text(&job["reason"])
    );
    // A running job that no run is processing has stopped: it goes on only when resumed.
    if job["status"] == "running" && job["in_progress"] == false {
        println!(
            "  stopped at {}; continue with: rhythm replay resume --account {} {} --reason \"…\"",
            text(&job["position"]),
            text(&job["account_id"]),
            text(&job["id"])
        );
    }
}
