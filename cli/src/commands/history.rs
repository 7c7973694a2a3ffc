//! `rhythm history`: a subscription, its deliveries, a delivery's attempts and the audit history.

use crate::client::{Client, DeliveryFilter, Page};
use crate::output::{print_next_cursor, text, Output};
use crate::subscription_args::SubscriptionArgs;
use crate::time_arg;
use anyhow::Result;
use clap::Subcommand;
use serde_json::Value;

#[derive(Debug, Subcommand)]
pub enum HistoryCommand {
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
        #[arg(long, value_parser = time_arg::parse)]
        from: Option<String>,
        #[arg(long, value_parser = time_arg::parse)]
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

pub async fn run(client: &Client, output: &Output, command: HistoryCommand) -> Result<()> {
    match command {
        HistoryCommand::Subscription { at } => {
            let subscription = client
                .get_subscription(&at.account, &at.subscription)
                .await?;
            output.show(&subscription, print_subscription);
        }
        HistoryCommand::Deliveries {
            at,
            status,
            from,
            to,
            limit,
            cursor,
        } => {
            let filter = DeliveryFilter {
                statuses: status.as_deref(),
                from: from.as_deref(),
                to: to.as_deref(),
            };
            let page = Page {
                limit,
                cursor: cursor.as_deref(),
            };
            let deliveries = client
                .list_deliveries(&at.account, &at.subscription, &filter, &page)
                .await?;
            output.show(&deliveries, print_deliveries);
        }
        HistoryCommand::Attempts { at, change } => {
            let attempts = client
                .list_attempts(&at.account, &at.subscription, &change)
                .await?;
            output.show(&attempts, print_attempts);
        }
        HistoryCommand::Audit {
            account,
            subscription,
            limit,
            cursor,
        } => {
            let page = Page {
                limit,
                cursor: cursor.as_deref(),
            };
            let audit = match &subscription {
                Some(subscription) => {
                    client
                        .list_subscription_audit(&account, subscription, &page)
                        .await?
                }
                None => client.list_account_audit(&account, &page).await?,
            };
            output.show(&audit, print_audit);
        }
    }
    Ok(())
}

fn print_subscription(subscription: &Value) {
    println!(
        "subscription {} ({}): {}, {} dead in a row",
        text(&subscription["id"]),
        text(&subscription["integration_id"]),
        text(&subscription["status"]),
        subscription["consecutive_dead"]
    );
    let pull = &subscription["pull"];
    println!(
        "  pull cursor {} (epoch {})",
        pull["acknowledged_change_id"].as_str().unwrap_or("(none)"),
        pull["epoch"]
    );
}

fn print_deliveries(page: &Value) {
    for d in page["data"].as_array().into_iter().flatten() {
        println!(
            "{}  {:<14} attempts {}  restarts {}  occurred {}{}",
            text(&d["change_id"]),
            text(&d["status"]),
            d["attempts"],
            d["restarts"],
            text(&d["occurred_at"]),
            d["last_error"]
                .as_str()
                .map(|e| format!("  last error: {e}"))
                .unwrap_or_default()
        );
    }
    print_next_cursor(page);
}

fn print_attempts(attempts: &Value) {
    println!(
        "delivery {}: {} ({} restarts)",
        text(&attempts["delivery_id"]),
        text(&attempts["status"]),
        attempts["restarts"]
    );
    for a in attempts["data"].as_array().into_iter().flatten() {
        println!(
            "  run {} attempt {}  {}  {:<18} {}  {} ms{}",
            a["run"],
            a["number"],
            text(&a["at"]),
            text(&a["class"]),
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
}

fn print_audit(page: &Value) {
    for e in page["data"].as_array().into_iter().flatten() {
        let target = e["change_id"]
            .as_str()
            .map(|c| format!("change {c}"))
            .or_else(|| e["job_id"].as_str().map(|j| format!("job {j}")))
            .unwrap_or_default();
        println!(
            "{}  {:<20} {}  subscription {} {}  — {}",
            text(&e["at"]),
            text(&e["action"]),
            text(&e["operator"]),
            text(&e["subscription_id"]),
            target,
            text(&e["reason"])
        );
    }
    print_next_cursor(page);
}
