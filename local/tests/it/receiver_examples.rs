//! The receiver's guide (`docs/receiving.md`) held to the code and its examples (`examples/`) run
//! against the local stack: each webhook receiver is started as its own process on loopback, an
//! integration of the stack delivers to it, and the test checks what it accepted, recognised as
//! a repeat and refused; the pull adapter reads and acknowledges through the HTTP API on
//! loopback. `scripts/examples.sh` (run by `make test`) installs the examples' pinned
//! dependencies.

use axum::http::StatusCode;
use local::testkit::api::{ApiAccount, OPERATOR_TOKEN};
use local::testkit::through_api::ApiSubscription;
use local::testkit::World;
use serde_json::{json, Value};
use shared::delivery::worker::webhook::SENT_HEADERS;
use shared::domain::integration_delivery::DeliveryStatus;
use shared::domain::signing::{sign, SigningSecret};
use shared::domain::time::SECOND;
use shared::ids::DeliveryId;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const GUIDE: &str = include_str!("../../../docs/receiving.md");

/// The names in the first column of the guide's table between `<!-- {marker} -->` and
/// `<!-- /{marker} -->`, sorted.
fn documented(marker: &str) -> Vec<String> {
    let table = GUIDE
        .split(&format!("<!-- {marker} -->"))
        .nth(1)
        .and_then(|rest| rest.split(&format!("<!-- /{marker} -->")).next())
        .unwrap_or_else(|| panic!("the guide marks its {marker} table"));
    let mut names: Vec<String> = table
        .lines()
        .filter_map(|row| row.strip_prefix("| `"))
        .map(|row| row.split('`').next().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn the_guide_documents_exactly_the_headers_an_attempt_sets_itself() {
    let documented: Vec<String> = documented("sent-headers")
        .iter()
        .map(|h| h.to_ascii_lowercase())
        .collect();
    let mut sent: Vec<String> = SENT_HEADERS.iter().map(|h| h.to_string()).collect();
    sent.sort();
    assert_eq!(documented, sent, "docs/receiving.md against SENT_HEADERS");
}

#[tokio::test]
async fn a_delivered_body_has_exactly_the_envelope_fields_the_guide_documents_and_every_header_the_adapter_lists(
) {
    let w = World::new().await;
    let tenant = w.api.account("Acme").await;
    w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    w.write_changes(&tenant.account_id, &[w.pipeline.now()])
        .await;
    let got = w.receiver.received();
    assert_eq!(got.len(), 1);
    let mut fields: Vec<String> = got[0].json().as_object().unwrap().keys().cloned().collect();
    fields.sort();
    assert_eq!(fields, documented("envelope-fields"), "{:?}", got[0].json());
    for header in SENT_HEADERS {
        assert!(
            got[0].header(header).is_some(),
            "{header}: {:?}",
            got[0].headers
        );
    }
}

// ------------------------------------------------------------------------------ the examples

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// An installed example's file, or a panic saying how to install it (a test never skips).
fn installed(path: &str) -> PathBuf {
    let p = repo().join(path);
    assert!(
        p.exists(),
        "{} is missing: run scripts/examples.sh (make test does)",
        p.display()
    );
    p
}

/// An example running as a child process; killed when dropped. Its stdout lines after the first
/// are kept.
struct Example {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Example {
    /// Starts `command` and waits for its first line, `listening on <url>`; returns the url.
    fn start(mut command: Command) -> (Self, String) {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {command:?}: {e}"));
        let stdout = child.stdout.take().unwrap();
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let example = Example { child, lines };
        let first = example
            .lines
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("{command:?} did not start: {e}"));
        let url = first
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("{first:?}"))
            .to_owned();
        (example, url)
    }

    /// The lines it printed so far.
    fn printed(&self) -> Vec<String> {
        self.lines.try_iter().collect()
    }
}

impl Drop for Example {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn python_receiver(secret: &str) -> Command {
    let mut c = Command::new(installed(".venv-examples/bin/python"));
    c.arg(repo().join("examples/python-receiver/receiver.py"))
        .env("WEBHOOK_SECRET", secret)
        .env("PORT", "0");
    c
}

fn node_receiver(secret: &str) -> Command {
    // `tsx` runs the TypeScript without checking its types: `tsc` checks them first.
    let dir = repo().join("examples/node-receiver");
    let checked = Command::new(installed("examples/node-receiver/node_modules/.bin/tsc"))
        .args(["-p", "."])
        .current_dir(&dir)
        .output()
        .expect("run tsc");
    assert!(
        checked.status.success(),
        "the Node receiver does not type-check: {}",
        String::from_utf8_lossy(&checked.stdout)
    );
    let mut c = Command::new("node");
    c.args(["--import", "tsx", "receiver.ts"])
        .current_dir(dir)
        .env("WEBHOOK_SECRET", secret)
        .env("PORT", "0");
    c
}

async fn stats(url: &str) -> Value {
    reqwest::get(format!("{url}/stats"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Posts `body` to the receiver as a delivery signed with `secret` at `timestamp`, except that
/// `sent` is what goes on the wire; returns the status.
async fn post_signed(url: &str, secret: &str, timestamp: i64, body: &str, sent: &str) -> u16 {
    let secret = SigningSecret::parse(secret).unwrap();
    let id = "msg_sent_by_the_test";
    reqwest::Client::new()
        .post(format!("{url}/webhooks/rhythm"))
        .header("content-type", "application/json")
        .header("webhook-id", id)
        .header("webhook-timestamp", timestamp.to_string())
        .header(
            "webhook-signature",
            sign(&secret, id, timestamp, body.as_bytes()),
        )
        .body(sent.to_owned())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// The webhook story every receiver example must pass: three changes delivered and accepted
/// once each; an operator's resend of one recognised as a repeat (same `webhook-id`); after a
/// secret rotation, a delivery still verified with the old secret during the grace; a tampered
/// and a stale request refused and not counted.
async fn a_receiver_example_verifies_dedupes_and_refuses(receiver: fn(&str) -> Command) {
    let w = World::new().await;
    let tenant: ApiAccount = w.api.account("Acme").await;
    let secret = SigningSecret::from_bytes(b"the receiver examples' test secret!")
        .unwrap()
        .expose_whsec();
    let (example, url) = Example::start(receiver(&secret));
    let created = w
        .api
        .post(
            "/v1/integrations",
            &tenant.token,
            json!({"name": "Receiver", "method": "webhook", "event_access_accepted": true,
                   "webhook_url": format!("{url}/webhooks/rhythm"), "signing_secret": secret}),
        )
        .await;
    let integration_id = created.created()["id"].as_str().unwrap().to_owned();
    let created = w
        .api
        .post(
            "/v1/subscriptions",
            &tenant.token,
            json!({"integration_id": integration_id, "record_types": ["catalog_item"],
                   "fields": ["sku", "name", "price"]}),
        )
        .await;
    let sub = ApiSubscription {
        account_id: tenant.account_id.clone(),
        integration_token: String::new(),
        subscription_id: created.created()["id"].as_str().unwrap().parse().unwrap(),
    };
    let now = w.pipeline.now();
    let changes = w.write_changes(&tenant.account_id, &[now, now, now]).await;
    let ids = |changes: &[shared::domain::change::Change]| {
        let mut ids: Vec<String> = changes
            .iter()
            .map(|c| DeliveryId::of(&c.change_id, &sub.subscription_id).to_string())
            .collect();
        ids.sort();
        ids
    };

    let got = stats(&url).await;
    assert_eq!(got["accepted"], 3, "{got}");
    assert_eq!(got["accepted_ids"], json!(ids(&changes)), "{got}");
    for c in &changes {
        assert_eq!(w.delivery_status(&sub, c).await, DeliveryStatus::Delivered);
    }
    let printed = example.printed();
    assert_eq!(
        printed.len(),
        3,
        "one line per processed change: {printed:?}"
    );
    // What the receiver printed, shown with `--nocapture` (the guide quotes a run).
    println!("{}", printed.join("\n"));

    // An operator resends a delivered change: the same webhook-id, acknowledged, not reprocessed.
    w.api
        .post(
            &format!(
                "/operator/accounts/{}/subscriptions/{}/deliveries/{}/retry",
                tenant.account_id, sub.subscription_id, changes[0].change_id
            ),
            OPERATOR_TOKEN,
            json!({"reason": "resend to check the receiver's deduplication"}),
        )
        .await
        .ok();
    w.pipeline.pump().await.unwrap();
    let got = stats(&url).await;
    assert_eq!(
        (&got["accepted"], &got["duplicates"]),
        (&json!(3), &json!(1)),
        "{got}"
    );
    assert_eq!(
        w.delivery_status(&sub, &changes[0]).await,
        DeliveryStatus::Delivered
    );
    assert!(example.printed().is_empty(), "the repeat is not processed");

    // The secret rotates; the receiver still holds the old one, which signs beside the new one
    // for the grace.
    w.api
        .patch(
            &format!("/v1/integrations/{integration_id}"),
            &tenant.token,
            json!({"rotate_signing_secret": true}),
        )
        .await
        .ok();
    let rotated = w.write_changes(&tenant.account_id, &[now]).await;
    let got = stats(&url).await;
    assert_eq!(got["accepted"], 4, "{got}");
    assert_eq!(
        w.delivery_status(&sub, &rotated[0]).await,
        DeliveryStatus::Delivered
    );

    // A tampered body and a stale timestamp: refused, nothing accepted.
    let body = json!({"type": "catalog_item.updated", "change_id": "01JTAMPERED0000000000000000",
                      "record_type": "catalog_item", "record_id": "SKU-1",
                      "occurred_at": "2026-01-01T00:00:00.000Z", "warehouse": null,
                      "changed_fields": ["price"], "data": {"price": 4.5}})
    .to_string();
    let wall = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let tampered = body.replace("4.5", "0.5");
    assert_eq!(
        post_signed(&url, &secret, wall, &body, &tampered).await,
        400
    );
    assert_eq!(
        post_signed(&url, &secret, wall - 600, &body, &body).await,
        400
    );
    let got = stats(&url).await;
    assert_eq!(
        (&got["accepted"], &got["duplicates"], &got["refused"]),
        (&json!(4), &json!(1), &json!(2)),
        "{got}"
    );
    println!("GET /stats: {got}");
}

#[tokio::test]
async fn the_python_receiver_example_verifies_each_delivery_counts_a_repeat_once_and_refuses_tampered_or_stale_ones(
) {
    a_receiver_example_verifies_dedupes_and_refuses(python_receiver).await;
}

#[tokio::test]
async fn the_node_receiver_example_verifies_each_delivery_counts_a_repeat_once_and_refuses_tampered_or_stale_ones(
) {
    a_receiver_example_verifies_dedupes_and_refuses(node_receiver).await;
}

/// Runs the pull adapter example once (`--once`: until nothing is pending) against the API at
/// `api`, two changes a page; returns its JSON lines.
async fn run_pull_adapter(api: &str, token: &str) -> Vec<Value> {
    let mut c = Command::new("python3");
    c.arg(repo().join("examples/pull-adapter/adapter.py"))
        .arg("--once")
        .env("RHYTHM_API_URL", api)
        .env("RHYTHM_INTEGRATION_TOKEN", token)
        .env("PAGE_LIMIT", "2");
    // The API this test serves runs on the test's runtime: wait for the adapter off it.
    let out = tokio::task::spawn_blocking(move || c.output().expect("run the pull adapter"))
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = String::from_utf8(out.stdout).unwrap();
    // What the adapter printed, shown with `--nocapture` (the guide quotes a run).
    print!("{out}");
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn the_pull_adapter_example_reads_each_change_once_in_cursor_order_acknowledges_them_and_reads_a_redelivery_after_its_cursor_goes_stale(
) {
    let w = World::new().await;
    let tenant = w.api.account("Acme").await;
    let sub = w.subscribe_through_api(&tenant, "poll", json!({})).await;
    let now = w.pipeline.now();
    let changes = w
        .write_changes(&tenant.account_id, &[now, now, now, now, now])
        .await;
    let (addr, server) = local::api_server::serve_loopback(w.api_state())
        .await
        .unwrap();
    let api = format!("http://{addr}");
    // The reads see what was written at least two seconds earlier (`pull_cursor::SETTLE`).
    w.pipeline.clock.advance(3 * SECOND);

    let lines = run_pull_adapter(&api, &sub.integration_token).await;
    let read: Vec<&str> = lines
        .iter()
        .filter_map(|l| l["change_id"].as_str())
        .collect();
    let written: Vec<String> = changes.iter().map(|c| c.change_id.to_string()).collect();
    assert_eq!(
        read, written,
        "each change once, in cursor order: {lines:?}"
    );
    let acks: Vec<&Value> = lines
        .iter()
        .filter(|l| l.get("acknowledged_change_id").is_some())
        .collect();
    assert_eq!(acks.len(), 3, "a page of two, two, one: {lines:?}");
    let delivered: u64 = acks.iter().map(|a| a["delivered"].as_u64().unwrap()).sum();
    assert_eq!(delivered, 5, "{lines:?}");
    assert_eq!(acks[2]["acknowledged_change_id"], json!(written[4]));
    for c in &changes {
        assert_eq!(w.delivery_status(&sub, c).await, DeliveryStatus::Delivered);
    }
    let pull = format!("/v1/pull/subscriptions/{}", sub.subscription_id);
    let cursor = w
        .api
        .get(&format!("{pull}/cursor"), &sub.integration_token)
        .await;
    assert_eq!(cursor.ok()["acknowledged_change_id"], json!(written[4]));

    // A cursor read now goes stale when an operator redelivers the second change.
    let page = w
        .api
        .get(&format!("{pull}/changes"), &sub.integration_token)
        .await;
    let old_cursor = page.ok()["next_cursor"].as_str().unwrap().to_owned();
    w.api
        .post(
            &format!(
                "/operator/accounts/{}/subscriptions/{}/deliveries/{}/retry",
                tenant.account_id, sub.subscription_id, written[1]
            ),
            OPERATOR_TOKEN,
            json!({"reason": "the adapter lost it"}),
        )
        .await
        .ok();
    let stale = w
        .api
        .put(
            &format!("{pull}/cursor"),
            &sub.integration_token,
            json!({"cursor": old_cursor}),
        )
        .await;
    stale.problem(StatusCode::CONFLICT);
    w.pipeline.clock.advance(3 * SECOND);

    // Read again from the acknowledged position: the redelivered change, once, marked so.
    let lines = run_pull_adapter(&api, &sub.integration_token).await;
    let read: Vec<&Value> = lines
        .iter()
        .filter(|l| l.get("change_id").is_some())
        .collect();
    assert_eq!(read.len(), 1, "{lines:?}");
    assert_eq!(
        (&read[0]["change_id"], &read[0]["redelivery"]),
        (&json!(written[1]), &json!(true))
    );
    assert_eq!(
        w.delivery_status(&sub, &changes[1]).await,
        DeliveryStatus::Delivered
    );
    server.abort();
}
