//! `rhythm audit verify`: checks that no entry of an account's audit history (or the catalog's,
//! `--account _catalog`) was replaced or removed. The API walks the history in the order it was
//! written and recomputes each entry's hash; a break is printed with the entry it is at, and the
//! command exits non-zero.

use crate::client::Client;
use crate::output::{text, Output};
use anyhow::{bail, Result};
use clap::Subcommand;
use serde_json::Value;

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Walk one history's hash chain and report its first broken link (exit 1 when broken).
    Verify {
        /// The account (`_catalog`: the event-type catalog's history).
        #[arg(long)]
        account: String,
        /// `SEQ:HASH`, a head printed by an earlier verification: the entry of that number must
        /// still have that hash (finds a chain rewritten from an entry onward).
        #[arg(long)]
        anchor: Option<String>,
    },
}

pub async fn run(client: &Client, output: &Output, command: AuditCommand) -> Result<()> {
    match command {
        AuditCommand::Verify { account, anchor } => {
            let answer = client.verify_audit(&account, anchor.as_deref()).await?;
            output.show(&answer, print_verification);
            if answer["intact"] != Value::Bool(true) {
                bail!(
                    "the audit history of {account} is broken: {}",
                    text(&answer["broken"]["reason"])
                );
            }
            Ok(())
        }
    }
}

fn print_verification(v: &Value) {
    let head = match v["head"]["seq"].as_u64() {
        Some(seq) => format!(
            "head {seq}:{} (keep it: --anchor)",
            text(&v["head"]["hash"])
        ),
        None => "no head".into(),
    };
    println!(
        "audit history {}: {} chained entries ({} from before the chain, not checked), {head}",
        text(&v["account_id"]),
        v["entries"],
        v["unchained_entries"],
    );
    if v["intact"] == Value::Bool(true) {
        println!("intact: every entry matches its hash and links to the one before it");
    } else {
        let broken = &v["broken"];
        match broken["seq"].as_u64() {
            Some(seq) => println!(
                "BROKEN at entry {seq} (id {}, position {}): {}",
                text(&broken["id"]),
                text(&broken["position"]),
                text(&broken["reason"])
            ),
            None => println!("BROKEN at the head: {}", text(&broken["reason"])),
        }
    }
}
