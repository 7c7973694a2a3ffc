//! `rhythm resume`: resume a paused subscription.

use crate::client::Client;
use crate::output::{text, Output};
use crate::subscription_args::SubscriptionArgs;
use anyhow::Result;
use clap::Args;

#[derive(Debug, Args)]
pub struct ResumeArgs {
    #[command(flatten)]
    pub at: SubscriptionArgs,
    /// Why (kept in the audit history).
    #[arg(long)]
    pub reason: String,
}

pub async fn run(client: &Client, output: &Output, args: ResumeArgs) -> Result<()> {
    let ResumeArgs { at, reason } = args;
    let answer = client
        .resume_subscription(&at.account, &at.subscription, &reason)
        .await?;
    output.show(&answer, |v| {
        println!(
            "subscription {}: paused → {} (dead count {} reset; audit {})",
            text(&v["subscription"]["id"]),
            text(&v["subscription"]["status"]),
            v["dead_count_before"],
            text(&v["audit_id"])
        );
    });
    Ok(())
}
