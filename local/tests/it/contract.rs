//! The API contract test: `openapi.yaml` is the server. schemathesis (pinned in
//! scripts/requirements-contract.txt, installed into `.venv-contract` by scripts/venv.sh) generates
//! requests from the spec — valid and invalid bodies, path, query and header parameters — against
//! the API served on loopback over this test's emulator stack, with an account token, an
//! integration token and the operator token, and checks every response: its status is documented
//! for the operation, its content type and schema are the documented ones, no 5xx, invalid
//! requests are refused and valid ones accepted. Its configuration (seed, bounds, the one check
//! that is off and why) is `contract.toml` beside this file.

use local::api_server::serve_loopback;
use local::receiver::Reply;
use local::testkit::api::{OPERATOR_TOKEN, PROBLEM_JSON};
use local::testkit::World;
use serde_json::{json, Value};
use shared::domain::time::{HOUR, MINUTE};
use shared::store::keys;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

/// The seeded resources the generated requests name (see `[parameters]` in contract.toml).
struct Seeded {
    env: Vec<(&'static str, String)>,
}

async fn seed(w: &World) -> Seeded {
    let tenant = w.api.account("Contract").await;
    let sub = w.subscribe_through_api(&tenant, "poll", json!({})).await;
    let read = w
        .api
        .get(
            &format!("/v1/subscriptions/{}", sub.subscription_id),
            &tenant.token,
        )
        .await;
    let integration_id = read.ok()["integration_id"].as_str().unwrap().to_owned();
    let spare = w.api.account("Spare").await;
    // The account deletion's: with an integration and a subscription for it to delete.
    let deleted = w.api.account("Deleted").await;
    w.subscribe_through_api(&deleted, "poll", json!({})).await;
    let webhook = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let webhook_integration = w
        .api
        .get(
            &format!("/v1/subscriptions/{}", webhook.subscription_id),
            &tenant.token,
        )
        .await;
    let webhook_integration_id = webhook_integration.ok()["integration_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let spare_integration = w
        .api
        .post(
            "/v1/integrations",
            &tenant.token,
            json!({"name": "Spare", "method": "poll", "event_access_accepted": true}),
        )
        .await;
    let spare_integration_id = spare_integration.created()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // Test events go to this one (the spare webhook subscription may be deleted first).
    let tested = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let now = w.pipeline.now();
    let changes = w
        .write_changes(&tenant.account_id, &[now.minus(MINUTE)])
        .await;
    let job = w
        .api
        .post(
            &format!(
                "/operator/accounts/{}/subscriptions/{}/replays",
                tenant.account_id, sub.subscription_id
            ),
            OPERATOR_TOKEN,
            json!({"from": now.minus(HOUR).to_rfc3339(), "to": now.to_rfc3339(), "reason": "contract"}),
        )
        .await;
    let job_id = job.accepted()["id"].as_str().unwrap().to_owned();
    // The account's own recovery of the same subscription.
    let recovery = w
        .api
        .post(
            &format!("/v1/subscriptions/{}/recover", sub.subscription_id),
            &tenant.token,
            json!({"since": now.minus(HOUR).to_rfc3339(), "reason": "contract"}),
        )
        .await;
    let recovery_id = recovery.accepted()["id"].as_str().unwrap().to_owned();
    let notice = w
        .api
        .post(
            "/v1/notices",
            &tenant.token,
            json!({"recipients": ["admin@example.com"], "channels": ["console"], "subject": "s", "body": "b", "idempotency_key": "contract"}),
        )
        .await;
    let notice_id = notice.accepted()["id"].as_str().unwrap().to_owned();
    // The account's own retry: a dead delivery (its receiver refused it) of the test-event
    // subscription; its own resume: a subscription paused as the worker leaves one.
    w.receiver.set_default(Reply::Status(400));
    let dead = w
        .write_changes(&tenant.account_id, &[now.minus(MINUTE)])
        .await;
    w.receiver.set_default(Reply::Status(200));
    let paused = w.subscribe_through_api(&tenant, "poll", json!({})).await;
    w.update(
        &keys::account_pk(&paused.account_id),
        &keys::subscription_sk(&paused.subscription_id),
        "SET #s = :paused, consecutive_dead = :fifty, paused_at = :now",
        &[
            (":paused", shared::store::expr::s("paused")),
            (":fifty", shared::store::expr::n(50)),
            (":now", shared::store::expr::n(now.millis())),
        ],
    )
    .await;
    // The publish token is an account's of its own: the issuing routes' `revoke_existing` (on the
    // tenant's and the spare account's publish tokens) never reaches it.
    let publisher = w.api.account("Publisher").await;
    let publish_token = w
        .api
        .post(
            &format!("/operator/accounts/{}/publish-tokens", publisher.account_id),
            OPERATOR_TOKEN,
            json!({}),
        )
        .await
        .created()["token"]
        .as_str()
        .unwrap()
        .to_owned();
    Seeded {
        env: vec![
            ("RHYTHM_PUBLISH_TOKEN", publish_token),
            ("RHYTHM_ACCOUNT_TOKEN", tenant.token.clone()),
            ("RHYTHM_INTEGRATION_TOKEN", sub.integration_token.clone()),
            ("RHYTHM_OPERATOR_TOKEN", OPERATOR_TOKEN.to_owned()),
            ("RHYTHM_ACCOUNT_ID", tenant.account_id.to_string()),
            ("RHYTHM_INTEGRATION_ID", integration_id),
            ("RHYTHM_SUBSCRIPTION_ID", sub.subscription_id.to_string()),
            ("RHYTHM_CHANGE_ID", changes[0].change_id.to_string()),
            ("RHYTHM_JOB_ID", job_id),
            ("RHYTHM_RECOVERY_JOB_ID", recovery_id),
            ("RHYTHM_NOTICE_ID", notice_id),
            ("RHYTHM_SPARE_ACCOUNT_ID", spare.account_id.to_string()),
            ("RHYTHM_DELETED_ACCOUNT_ID", deleted.account_id.to_string()),
            ("RHYTHM_WEBHOOK_INTEGRATION_ID", webhook_integration_id),
            (
                "RHYTHM_SPARE_SUBSCRIPTION_ID",
                webhook.subscription_id.to_string(),
            ),
            ("RHYTHM_SPARE_INTEGRATION_ID", spare_integration_id),
            (
                "RHYTHM_WEBHOOK_SUBSCRIPTION_ID",
                tested.subscription_id.to_string(),
            ),
            ("RHYTHM_DEAD_CHANGE_ID", dead[0].change_id.to_string()),
            (
                "RHYTHM_PAUSED_SUBSCRIPTION_ID",
                paused.subscription_id.to_string(),
            ),
        ],
    }
}

/// What one schemathesis run found.
struct Run {
    status: std::process::ExitStatus,
    output: String,
    report: Value,
    elapsed: Duration,
}

async fn schemathesis(base_url: &str, seeded: &Seeded) -> Run {
    let root = repo();
    let bin = root.join(".venv-contract/bin/schemathesis");
    assert!(
        bin.exists(),
        "{} is missing: run scripts/venv.sh (make test does) to install the pinned schemathesis",
        bin.display()
    );
    // Its working directory (reports, caches) is a fresh one per run.
    let dir = std::env::temp_dir().join(format!("rhythm-contract-{}", ulid::Ulid::new()));
    std::fs::create_dir_all(&dir).expect("a report directory");
    let report = dir.join("report.json");
    let mut command = std::process::Command::new(&bin);
    command
        .current_dir(&dir)
        .arg("--config-file")
        .arg(root.join("local/tests/it/contract.toml"))
        .arg("--no-color")
        .args(["run", "--url", base_url, "--report", "json"])
        .arg("--report-json-path")
        .arg(&report)
        .arg(root.join("openapi.yaml"))
        .envs(seeded.env.iter().map(|(k, v)| (*k, v.as_str())))
        .env("SCHEMATHESIS_TELEMETRY", "false");
    let started = Instant::now();
    // A blocking wait on its own thread: the API server keeps answering on the runtime's.
    let out = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("the waiting thread")
        .expect("schemathesis runs");
    let output = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let report = std::fs::read_to_string(&report)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    let _ = std::fs::remove_dir_all(&dir);
    Run {
        status: out.status,
        output,
        report,
        elapsed: started.elapsed(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_response_to_requests_generated_from_openapi_conforms_to_it() {
    let w = World::new().await;
    let seeded = seed(&w).await;
    // The contract is the answers' shapes. Every request of the run falls in one second of the
    // world's clock, so the account's request rate is raised past what the run sends (its 429 is
    // documented on every token route, and tested in caller_bounds.rs).
    let mut state = w.api_state();
    state.config.account_limits.requests_per_second =
        *shared::operations::account::limits::RATE_RANGE.end();
    let (addr, server) = serve_loopback(state).await.expect("the API serves");
    // The server answers as the spec's local server does.
    let health = reqwest::get(format!("http://{addr}/health")).await.unwrap();
    assert_eq!(health.status(), 200);
    let missing = reqwest::get(format!("http://{addr}/v1/whoami"))
        .await
        .unwrap();
    assert_eq!(missing.headers()["content-type"], PROBLEM_JSON);

    let run = schemathesis(&format!("http://{addr}"), &seeded).await;
    server.abort();
    eprintln!("{}", run.output);
    eprintln!("schemathesis took {:.1} s", run.elapsed.as_secs_f64());
    assert!(
        run.status.success(),
        "schemathesis found responses that do not conform to openapi.yaml (report above): {}",
        run.report
    );
    // It really tested every documented operation, with many generated requests each.
    let operations = &run.report["operations"];
    assert_eq!(
        operations["total"],
        documented_operations(),
        "{}",
        run.report
    );
    assert_eq!(operations["tested"], operations["total"], "{}", run.report);
    let generated = run.report["test_cases"]["generated"].as_u64().unwrap_or(0);
    assert!(generated >= 1000, "{generated} requests: {}", run.report);
    // The account deletion reached the account seeded for it, and only that one: it is gone
    // with its deletion audited, while the account every other request uses is still there.
    let seeded_id = |name: &str| {
        let (_, v) = seeded.env.iter().find(|(k, _)| *k == name).expect(name);
        v.clone()
    };
    let deleted = seeded_id("RHYTHM_DELETED_ACCOUNT_ID");
    w.api
        .get(&format!("/operator/accounts/{deleted}"), OPERATOR_TOKEN)
        .await
        .problem(axum::http::StatusCode::NOT_FOUND);
    let audit = w
        .api
        .get(
            &format!("/operator/accounts/{deleted}/audit"),
            OPERATOR_TOKEN,
        )
        .await;
    assert_eq!(audit.ok()["data"][0]["action"], "delete_account");
    let tenant = seeded_id("RHYTHM_ACCOUNT_ID");
    w.api
        .get(&format!("/operator/accounts/{tenant}"), OPERATOR_TOKEN)
        .await
        .ok();
}

/// How many operations openapi.yaml documents.
fn documented_operations() -> usize {
    let text = std::fs::read_to_string(repo().join("openapi.yaml")).expect("openapi.yaml");
    let spec: serde_yaml::Value = serde_yaml::from_str(&text).expect("YAML");
    spec["paths"]
        .as_mapping()
        .expect("paths")
        .values()
        .flat_map(|item| item.as_mapping().expect("a path item").keys())
        .filter(|k| {
            matches!(
                k.as_str(),
                Some("get" | "put" | "post" | "patch" | "delete")
            )
        })
        .count()
}
