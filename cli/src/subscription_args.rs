//! The arguments that name a subscription, shared by the subcommands that act on one.

use clap::Args;

#[derive(Debug, Args)]
pub struct SubscriptionArgs {
    #[arg(long)]
    pub account: String,
    #[arg(long)]
    pub subscription: String,
}
