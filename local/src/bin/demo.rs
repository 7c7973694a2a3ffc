//! `make demo`: the delivery pipeline end to end on the local emulator, with a virtual clock.
//!
//! An operator creates an account through the HTTP API; the account configures webhook, filtered
//! and built-in subscriptions; the owning application writes changes; the demo shows each
//! delivery move to delivered, retrying and dead as the clock jumps through the backoff schedule,
//! and ends with measured request counts.

use anyhow::{bail, Context, Result};
use local::api_server::serve_loopback;
use local::fixtures::catalog_change;
use local::pipeline::Pipeline;
use local::receiver::{Receiver, Reply};
use serde_json::{json, Value};
use shared::api::auth::sha256_hex;
use shared::api::{ApiState, OperatorAuth};
use shared::domain::retry::FIXED_SCHEDULE;
use shared::store::models::DeliveryRecord;
use std::collections::BTreeMap;
use std::sync::Arc;

const OPERATOR_TOKEN: &str = "demo-operator-token";

struct Api {
    base: String,
    http: reqwest::Client,
}

impl Api {
    async fn post(&self, path: &str, token: &str, body: Value) -> Result<Value> {
        let response = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await?;
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            bail!("POST {path} answered {status}: {body}");
        }
        println!("   POST {path:<28} → {status}");
        Ok(body)
    }
}

/// One configured subscription, as the demo shows it.
struct Column {
    title: &'static str,
    subscription_id: String,
}

#[tokio::main]
async fn main() -> Result<()> {
    println!("Rhythm delivery — local demo\n");
    let p = Pipeline::new().await;
    println!(
        "   emulator {}  ·  stack prefix {}",
        std::env::var("AWS_ENDPOINT_URL").unwrap_or_default(),
        p.t.stack.prefix
    );

    // Receivers on loopback stand in for the integrations' endpoints.
    let shop = Receiver::start().await;
    let erp = Receiver::start().await;
    erp.script([Reply::Status(503), Reply::Status(503)]);
    let crm = Receiver::start().await;
    crm.set_default(Reply::Full {
        status: 500,
        headers: vec![],
        body: "upstream database unavailable".into(),
    });

    let state = ApiState::new(
        p.t.clients.clone(),
        p.t.config.clone(),
        Arc::new(p.clock.clone()),
        OperatorAuth::StaticToken {
            sha256_hex: sha256_hex(OPERATOR_TOKEN),
            operator_id: "demo-operator".into(),
        },
    );
    let (addr, _server) = serve_loopback(state).await?;
    let api = Api {
        base: format!("http://{addr}"),
        http: reqwest::Client::new(),
    };
    println!("   HTTP API on http://{addr}\n");

    println!("1. An operator creates an account");
    let created = api
        .post(
            "/operator/accounts",
            OPERATOR_TOKEN,
            json!({"name": "Northwind Traders", "admin_emails": ["ops@northwind.example"]}),
        )
        .await?;
    let account_id = created["account"]["id"]
        .as_str()
        .context("account id")?
        .to_string();
    let token = created["token"]
        .as_str()
        .context("account token")?
        .to_string();

    println!("\n2. The account installs integrations and subscribes them to catalog changes");
    let mut columns = Vec::new();
    let fields = json!(["sku", "name", "price"]);
    let setups: [(&str, Value, Option<Value>); 5] = [
        (
            "Shop",
            json!({"name": "Shop", "method": "webhook", "webhook_url": shop.url("/rhythm"), "event_access_accepted": true}),
            None,
        ),
        (
            "Big-ticket",
            json!({"name": "Big-ticket feed", "method": "webhook", "webhook_url": shop.url("/big"), "event_access_accepted": true}),
            Some(json!({"field": "record.price", "gt": 10})),
        ),
        (
            "Flaky ERP",
            json!({"name": "Flaky ERP", "method": "webhook", "webhook_url": erp.url("/erp"), "event_access_accepted": true}),
            None,
        ),
        (
            "Legacy CRM",
            json!({"name": "Legacy CRM", "method": "webhook", "webhook_url": crm.url("/crm"), "event_access_accepted": true}),
            None,
        ),
        (
            "Snapshots",
            json!({"name": "Snapshot store", "method": "internal", "handler": "record_snapshot", "event_access_accepted": true}),
            None,
        ),
    ];
    for (title, integration, filter) in setups {
        let created = api.post("/v1/integrations", &token, integration).await?;
        let integration_id = created["id"]
            .as_str()
            .context("integration id")?
            .to_string();
        let mut body = json!({"integration_id": integration_id, "record_types": ["catalog_item"], "fields": fields});
        if let Some(f) = filter {
            body["filter"] = f;
        }
        let sub = api.post("/v1/subscriptions", &token, body).await?;
        let subscription_id = sub["id"].as_str().context("subscription id")?.to_string();
        columns.push(Column {
            title,
            subscription_id,
        });
    }
    println!("   Big-ticket only takes changes with price > 10; Flaky ERP answers 503 twice; Legacy CRM always 500.");

    println!("\n3. The owning application writes three catalog changes");
    let mut changes = Vec::new();
    for price in [3.5, 24.0, 12.75] {
        let c = catalog_change(&account_id, p.now(), price);
        p.write_change(&c).await?;
        changes.push((c.change_id.clone(), price));
    }
    p.t.meter.reset();
    p.pump().await?;
    show(&p, &account_id, &columns, &changes, "t+0").await;

    println!("\n4. The virtual clock walks the backoff schedule (1 m, 5 m, 30 m, 2 h, 6 h)");
    let mut elapsed = std::time::Duration::ZERO;
    for wait in FIXED_SCHEDULE {
        p.advance(wait).await?;
        elapsed += wait;
        show(
            &p,
            &account_id,
            &columns,
            &changes,
            &format!("t+{}", human(elapsed)),
        )
        .await;
    }

    println!("\n5. Summary");
    let mut by_status: BTreeMap<String, u32> = BTreeMap::new();
    let mut delivered = 0;
    for column in &columns {
        for (change_id, _) in &changes {
            if let Some(d) = p
                .delivery(&account_id, change_id, &column.subscription_id)
                .await
            {
                *by_status.entry(d.status.to_string()).or_default() += 1;
                if d.status.to_string() == "delivered" {
                    delivered += 1;
                }
            }
        }
    }
    for (status, n) in &by_status {
        println!("   {status:<15} {n}");
    }
    println!(
        "   receiver calls: Shop {}, Flaky ERP {}, Legacy CRM {} (six attempts each, then dead)",
        shop.count(),
        erp.count(),
        crm.count()
    );
    let dynamo = p.t.meter.total("DynamoDB", None);
    let sqs = p.t.meter.total("SQS", None);
    println!(
        "   handler requests for the whole run: DynamoDB {dynamo}, SQS {sqs} ({delivered} deliveries delivered; retries and dead ones included)"
    );
    let ops: Vec<String> =
        p.t.meter
            .snapshot()
            .iter()
            .map(|((_, op), n)| format!("{op} {n}"))
            .collect();
    println!("   by operation: {}", ops.join(", "));
    println!("   (the dispatcher's one-minute sweep queries 16 shards per run: most reads above are sweeps)");
    let paused = p
        .subscription(&account_id, &columns[3].subscription_id)
        .await
        .map(|s| s.consecutive_dead)
        .unwrap_or_default();
    println!("   Legacy CRM's consecutive dead count: {paused} (it pauses at 50)");
    Ok(())
}

async fn show(
    p: &Pipeline,
    account: &str,
    columns: &[Column],
    changes: &[(String, f64)],
    at: &str,
) {
    print!("\n   {at:<8} {:<10}", "price");
    for c in columns {
        print!("{:<17}", c.title);
    }
    println!();
    for (change_id, price) in changes {
        print!("   {:<8} {:<10}", "", format!("{price:.2}"));
        for c in columns {
            let cell = match p.delivery(account, change_id, &c.subscription_id).await {
                Some(d) => cell(&d),
                None => "—".into(),
            };
            print!("{cell:<17}");
        }
        println!();
    }
}

fn cell(d: &DeliveryRecord) -> String {
    match d.attempts {
        0 => d.status.to_string(),
        n => format!("{} ({n})", d.status),
    }
}

fn human(d: std::time::Duration) -> String {
    let m = d.as_secs() / 60;
    if m < 60 {
        format!("{m}m")
    } else {
        format!("{}h{:02}m", m / 60, m % 60)
    }
}
