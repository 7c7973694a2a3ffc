//! `rhythm retry`: restart one delivery from its first attempt.

use crate::client::Client;
use crate::output::{text, Output};
use crate::subscription_args::SubscriptionArgs;
use anyhow::Result;
use clap::Args;

#[derive(Debug, Args)]
pub struct RetryArgs {
    #[command(flatten)]
    pub at: SubscriptionArgs,
    /// The change id of the delivery.
    #[arg(long)]
    pub change: String,
    /// Why (kept in the audit history).
    #[arg(long)]
    pub reason: String,
}

pub async fn run(client: &Client, output: &Output, args: RetryArgs) -> Result<()> {
    let RetryArgs { at, change, reason } = args;
    let answer = client
        .retry_delivery(&at.account, &at.subscription, &change, &reason)
        .await?;
    output.show(&answer, |v| {
        println!(
            "delivery {}: {} → {} (attempts start again at 1; audit {})",
            text(&v["delivery"]["id"]),
            text(&v["previous_status"]),
            text(&v["delivery"]["status"]),
            text(&v["audit_id"])
        );
    });
    Ok(())
}
