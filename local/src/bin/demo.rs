//! `make demo`: the delivery pipeline end to end on the local emulator, with a virtual clock.
//!
//! An operator creates an account through the HTTP API; the account configures webhook, filtered
//! and built-in subscriptions; the owning application writes changes; the demo shows each
//! delivery move to delivered, retrying and dead as the clock jumps through the backoff schedule,
//! and ends with measured request counts. Then it serves the API and the web console on loopback
//! with the demo's data, the pipeline pumped in the background, and prints a login link for the
//! operator (`console:`) and one for the account's administrator (`portal:`) until interrupted;
//! `DEMO_EXIT=1` ends after the story instead.

use anyhow::{bail, Context, Result};
use local::fixtures::catalog_change;
use local::pipeline::Pipeline;
use local::receiver::{Receiver, Reply};
use local::served::{back_date, interrupted, HttpApi, NotificationPump, ServedStack};
use serde_json::{json, Value};
use shared::domain::retry::FIXED_SCHEDULE;
use shared::ids::{AccountId, ChangeId, SubscriptionId};
use shared::notify::confirm::{self, ProviderEventSettings};
use shared::notify::sns;
use shared::store::delivery::Delivery;
use shared::web::auth::sha256_hex;
use shared::web::{ApiState, OperatorAuth};
use std::collections::BTreeMap;
use std::sync::Arc;

const OPERATOR_TOKEN: &str = "demo-operator-token";

/// One configured subscription, as the demo shows it.
struct Column {
    title: &'static str,
    subscription_id: SubscriptionId,
}

#[tokio::main]
async fn main() -> Result<()> {
    println!("Rhythm delivery — local demo\n");
    let p = Arc::new(Pipeline::new().await);
    // The story walks the virtual clock through the whole backoff schedule; it starts that far
    // in the past, so that it ends about now and the console served afterwards (whose clock
    // follows the wall clock) shows real times.
    back_date(&p.clock, FIXED_SCHEDULE.iter().sum());
    println!(
        "   emulator {}  ·  stack prefix {}",
        std::env::var("AWS_ENDPOINT_URL").unwrap_or_default(),
        p.stack.stack.prefix
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
        p.stack.clients.clone(),
        p.stack.config.clone(),
        Arc::new(p.clock.clone()),
        OperatorAuth::StaticToken {
            sha256_hex: sha256_hex(OPERATOR_TOKEN),
            operator_id: "demo-operator".into(),
        },
    );
    let served = ServedStack::serve(p.clone(), state).await?;
    let api = HttpApi::new(served.url(""), true);
    println!("   HTTP API on {}\n", api.base);

    println!("1. An operator creates an account");
    let created = api
        .post(
            "/operator/accounts",
            OPERATOR_TOKEN,
            json!({"name": "Northwind Traders", "admin_emails": ["ops@northwind.example"]}),
        )
        .await?;
    let account_id: AccountId = created["account"]["id"]
        .as_str()
        .context("account id")?
        .parse()?;
    let token = created["token"]
        .as_str()
        .context("account token")?
        .to_string();
    // The account's notices may post to its own Slack workspace (its email goes to its
    // administrator, which needs no allowlist).
    api.call(
        reqwest::Method::PUT,
        &format!("/operator/accounts/{account_id}/notice-allowlist"),
        OPERATOR_TOKEN,
        Some(json!({"slack_workspaces": ["T0"], "reason": "the demo's workspace"})),
    )
    .await?;

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
        let subscription_id = sub["id"].as_str().context("subscription id")?.parse()?;
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
    p.stack.meter.reset();
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
    let dynamo = p.stack.meter.total("DynamoDB", None);
    let sqs = p.stack.meter.total("SQS", None);
    println!(
        "   handler requests for the whole run: DynamoDB {dynamo}, SQS {sqs} ({delivered} deliveries delivered; retries and dead ones included)"
    );
    let ops: Vec<String> = p
        .stack
        .meter
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

    println!("\n6. A warehouse adapter pulls its changes through the cursor API");
    let pull = api
        .post(
            "/v1/integrations",
            &token,
            json!({"name": "Data warehouse", "method": "poll", "event_access_accepted": true}),
        )
        .await?;
    let adapter_token = pull["token"]
        .as_str()
        .context("integration token")?
        .to_string();
    let pull_sub = api
        .post(
            "/v1/subscriptions",
            &token,
            json!({"integration_id": pull["id"], "record_types": ["catalog_item"], "fields": ["sku", "price"]}),
        )
        .await?;
    let pull_sub_id: SubscriptionId = pull_sub["id"]
        .as_str()
        .context("subscription id")?
        .parse()?;
    let mut pulled_changes = Vec::new();
    for price in [5.0, 6.0, 7.0] {
        let c = catalog_change(&account_id, p.now(), price);
        p.write_change(&c).await?;
        pulled_changes.push(c.change_id.clone());
    }
    p.pump().await?;
    p.clock.advance(std::time::Duration::from_secs(3));
    let changes_path = format!("/v1/pull/subscriptions/{pull_sub_id}/changes?limit=2");
    let page = api.get(&changes_path, &adapter_token).await?;
    let read = page["data"].as_array().map(Vec::len).unwrap_or_default();
    println!(
        "   read {read} of 3 pending changes (has_more: {})",
        page["has_more"]
    );
    api.call(
        reqwest::Method::PUT,
        &format!("/v1/pull/subscriptions/{pull_sub_id}/cursor"),
        &adapter_token,
        Some(json!({"cursor": page["next_cursor"]})),
    )
    .await?;
    for (i, change_id) in pulled_changes.iter().enumerate() {
        if let Some(d) = p.delivery(&account_id, change_id, &pull_sub_id).await {
            println!("   change {} → {}", i + 1, d.status);
        }
    }

    println!("\n7. Legacy CRM is fixed; an operator retries one of its dead deliveries");
    crm.set_default(Reply::Status(200));
    let (dead_change, _) = &changes[0];
    let retry_path = format!(
        "/operator/accounts/{account_id}/subscriptions/{}/deliveries/{dead_change}/retry",
        columns[3].subscription_id
    );
    api.post(
        &retry_path,
        OPERATOR_TOKEN,
        json!({"reason": "CRM database restored; customer asked for a resend"}),
    )
    .await?;
    p.pump().await?;
    if let Some(d) = p
        .delivery(&account_id, dead_change, &columns[3].subscription_id)
        .await
    {
        println!(
            "   the delivery is {} after attempt {} of a fresh progression ({} attempts kept in its history)",
            d.status,
            d.attempts,
            d.attempt_log.len()
        );
    }

    println!("\n8. The account sends a notice over email, Slack and the console");
    let notifications = NotificationPump::new(&p).await;
    notices(&p, &notifications, &api, &token).await?;

    println!("\n9. An application that is not on DynamoDB publishes a change through the API");
    publish(&p, &api, &token, &shop).await?;

    println!("\n10. The event monitor's view of what ran");
    p.roll_up_pass().await?;
    let events = api.get("/v1/events?limit=50", &token).await?;
    println!(
        "   {:<28} {:<16} {:<10} {:<9} subscribers",
        "change", "code", "status", "internal"
    );
    for e in events["data"].as_array().cloned().unwrap_or_default() {
        println!(
            "   {:<28} {:<16} {:<10} {:<9} {}",
            e["id"].as_str().unwrap_or_default(),
            e["event_code"]
                .as_str()
                .unwrap_or_default()
                .trim_start_matches("catalog_item."),
            e["event_status"].as_str().unwrap_or_default(),
            e["internal_status"].as_str().unwrap_or_default(),
            e["subscribers"]
        );
    }
    let attention = api.get("/v1/attention", &token).await?;
    println!("   needs attention: {}", summarize_attention(&attention));

    if std::env::var("DEMO_EXIT").is_ok_and(|v| !v.is_empty() && v != "0") {
        return Ok(());
    }
    let stop = interrupted()?;
    println!("\n11. The console, served with the demo's data until interrupted (Ctrl-C)");
    let operator_link = api
        .post("/operator/console-links", OPERATOR_TOKEN, json!({}))
        .await?;
    let admin_link = api.post("/v1/console-links", &token, json!({})).await?;
    for (label, link) in [("console", &operator_link), ("portal", &admin_link)] {
        let path = link["url"].as_str().context("a login link's url")?;
        println!("{label}: {}", served.url(path));
    }
    println!("   (each link signs in for 15 minutes; the receivers keep answering)");
    // The pipeline keeps running: a retry or replay made in the console is delivered.
    let signal = served.pump_until(Some(&notifications), stop).await;
    served.stop();
    println!("\n   {signal}: stopped serving");
    Ok(())
}

/// Notification delivery (`docs/lifecycles.md#notification-delivery`): a notice fans out to one
/// delivery per channel, the worker sends them, and SES's signed confirmation (through SNS)
/// completes the email.
async fn notices(
    p: &Pipeline,
    notifications: &NotificationPump,
    api: &HttpApi,
    token: &str,
) -> Result<()> {
    const TOPIC: &str = "arn:aws:sns:us-east-1:000000000000:rhythm-notification-events";
    // SNS messages are verified against a locally generated certificate (there is no network).
    confirm::install(ProviderEventSettings::from_values(
        Some(TOPIC),
        None,
        Arc::new(sns::local::test_http()),
    ));
    let slack = Receiver::start().await;
    slack.set_default(Reply::Full {
        status: 200,
        headers: vec![("x-slack-req-id".into(), "demo-req-1".into())],
        body: "ok".into(),
    });
    let notice = api
        .post(
            "/v1/notices",
            token,
            json!({
                "recipients": [{"id": "ops", "email": "ops@northwind.example", "slack_webhook_url": slack.url("/services/T0/B0/demo")}],
                "channels": ["email", "slack", "console"],
                "subject": "Catalog sync finished",
                "body": "1,204 items were updated.",
                "idempotency_key": "demo-notice-1",
            }),
        )
        .await?;
    let path = format!(
        "/v1/notices/{}",
        notice["id"].as_str().context("notice id")?
    );
    // The notification table's stream fans the notice out and publishes the work; the worker sends.
    notifications.pump().await?;
    println!(
        "   after the worker:   {}",
        progress_line(&api.get(&path, token).await?)
    );
    let deliveries = api.get(&format!("{path}/deliveries"), token).await?;
    let mut ses_id = String::new();
    for d in deliveries["data"].as_array().into_iter().flatten() {
        println!(
            "   {:<8} {:<10} {}",
            d["channel"].as_str().unwrap_or_default(),
            d["status"].as_str().unwrap_or_default(),
            d["provider_ref"].as_str().unwrap_or_default()
        );
        if d["channel"] == "email" {
            ses_id = d["provider_ref"].as_str().unwrap_or_default().to_string();
        }
    }
    println!(
        "   the Slack receiver got {} post(s)",
        slack.received().len()
    );
    let endpoint = local::emulator::endpoint().await?;
    let data: Value = reqwest::get(format!("{endpoint}/moto-api/data.json"))
        .await?
        .json()
        .await?;
    let captured = data["ses"]["Message"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["id"] == ses_id.as_str())
        .count();
    println!("   the emulator captured {captured} email(s) with SES message id {ses_id}");
    let event = sns::local::notification(
        TOPIC,
        "demo-sns-1",
        &json!({"eventType": "Delivery", "mail": {"messageId": ses_id},
                "delivery": {"timestamp": p.now().to_rfc3339(), "smtpResponse": "250 OK"}})
        .to_string(),
        "2",
        p.now(),
    );
    api.post("/v1/provider-events/ses", "", serde_json::to_value(&event)?)
        .await?;
    println!(
        "   after SES confirms: {}",
        progress_line(&api.get(&path, token).await?)
    );
    Ok(())
}

fn progress_line(view: &Value) -> String {
    let p = &view["progress"];
    [
        "queued",
        "sending",
        "sent",
        "delivered",
        "failed",
        "skipped",
    ]
    .iter()
    .map(|s| format!("{s} {}", p[*s]))
    .collect::<Vec<_>>()
    .join(" · ")
}

/// "2 dead deliveries, 0 paused subscriptions" from the attention view, whatever its lists hold.
fn summarize_attention(view: &Value) -> String {
    match view.as_object() {
        Some(map) => map
            .iter()
            .filter_map(|(k, v)| {
                v.as_array()
                    .map(|a| format!("{} {}", a.len(), k.replace('_', " ")))
            })
            .collect::<Vec<_>>()
            .join(", "),
        None => view.to_string(),
    }
}

async fn show(
    p: &Pipeline,
    account: &AccountId,
    columns: &[Column],
    changes: &[(ChangeId, f64)],
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

fn cell(d: &Delivery) -> String {
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

/// The event-type catalog, a subscription's typo refused by it, and a change published with a
/// publish token (carrying the application's X-Ray trace) delivered to the Shop.
async fn publish(p: &Pipeline, api: &HttpApi, token: &str, shop: &Receiver) -> Result<()> {
    let catalog = api.get("/v1/event-types", token).await?;
    for t in catalog["data"].as_array().cloned().unwrap_or_default() {
        println!(
            "   event type {} (version {})",
            t["type"].as_str().unwrap_or_default(),
            t["version"]
        );
    }
    let integrations = api.get("/v1/integrations", token).await?;
    let shop_id = integrations["data"]
        .as_array()
        .and_then(|all| all.iter().find(|i| i["name"] == "Shop"))
        .and_then(|i| i["id"].as_str())
        .context("the Shop integration")?
        .to_string();
    let typo =
        json!({"integration_id": shop_id, "record_types": ["catalog_itme"], "fields": ["sku"]});
    match api.post("/v1/subscriptions", token, typo).await {
        Ok(_) => bail!("a subscription to an unknown record type was accepted"),
        Err(e) => println!(
            "   a subscription to \"catalog_itme\" is refused: {}",
            first_line(&e)
        ),
    }
    let issued = api
        .post(
            "/v1/publish-tokens",
            token,
            json!({"reason": "the web shop's backend publishes its own changes"}),
        )
        .await?;
    let publisher = issued["token"].as_str().context("publish token")?;
    let trace = "1-5759e988-bd862e3fe1be46a994272793";
    let change = json!({
        "record_type": "catalog_item",
        "record_id": "SKU-PUB-1",
        "operation": "updated",
        "changed_fields": ["price"],
        "trace_id": trace,
        "record": {"sku": "SKU-PUB-1", "name": "Published mug", "price": 9.5}
    });
    let published = api.post("/v1/changes", publisher, change).await?;
    let change_id = published["changes"][0]["change_id"]
        .as_str()
        .context("published change id")?
        .to_string();
    let before = shop.count();
    p.pump().await?;
    let arrived = shop
        .received()
        .into_iter()
        .skip(before)
        .find(|r| r.json()["change_id"] == change_id.as_str())
        .context("the published change did not reach the Shop")?;
    println!(
        "   change {change_id} reached the Shop with traceparent {} (X-Ray trace {trace})",
        arrived.header("traceparent").unwrap_or("none")
    );
    Ok(())
}

/// The first line of an error's text: the answer's status and problem.
fn first_line(e: &anyhow::Error) -> String {
    let text = e.to_string();
    let line = text.lines().next().unwrap_or_default();
    line.chars().take(160).collect()
}
