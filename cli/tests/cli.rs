//! The `rhythm` command line against a real API on loopback (the local emulator behind it): its
//! argument parsing (clap's usage errors exit 2) and an operator retry made from the terminal.

use local::receiver::Reply;
use local::testkit::api::OPERATOR_TOKEN;
use local::testkit::through_api::change_ids;
use local::testkit::World;
use serde_json::{json, Value};
use shared::domain::integration_delivery::DeliveryStatus;
fn rhythm(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_rhythm"))
        .args(args)
        .env_remove("RHYTHM_API_URL")
        .env_remove("RHYTHM_OPERATOR_TOKEN")
        .output()
        .expect("run rhythm")
}

#[tokio::test]
async fn the_rhythm_cli_parses_its_arguments_and_retries_through_a_local_api_server() {
    // Argument parsing: help, and refusals with clap's usage errors (exit 2).
    let help = rhythm(&["--help"]);
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    for command in ["retry", "replay", "resume", "history"] {
        assert!(text.contains(command), "{text}");
    }
    let missing = rhythm(&[
        "--api-url",
        "http://127.0.0.1:1",
        "--token",
        "t",
        "replay",
        "start",
        "--account",
        "a",
        "--subscription",
        "s",
    ]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("--from"));
    let no_token = rhythm(&[
        "--api-url",
        "http://127.0.0.1:1",
        "resume",
        "--account",
        "a",
        "--subscription",
        "s",
        "--reason",
        "r",
    ]);
    assert_eq!(no_token.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&no_token.stderr).contains("token"));

    // A dead delivery, retried from the terminal against the API on loopback.
    let w = World::new().await;
    w.receiver.set_default(Reply::Status(410));
    let tenant = w.api.account("Tenant").await;
    let sub = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let changes = w.write_changes(&sub.account_id, &[w.pipeline.now()]).await;
    assert_eq!(
        w.delivery_status(&sub, &changes[0]).await,
        DeliveryStatus::Dead
    );
    w.receiver.set_default(Reply::Status(200));
    let (addr, server) = local::api_server::serve_loopback(w.api_state())
        .await
        .unwrap();
    let url = format!("http://{addr}");
    let base = ["--api-url", url.as_str(), "--token", OPERATOR_TOKEN];
    let run = |args: Vec<String>| async move {
        tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            rhythm(&refs)
        })
        .await
        .unwrap()
    };
    let with = |rest: &[&str]| -> Vec<String> {
        base.iter()
            .chain(rest.iter())
            .map(|s| s.to_string())
            .collect()
    };
    let listed = run(with(&[
        "--json",
        "history",
        "deliveries",
        "--account",
        sub.account_id.as_str(),
        "--subscription",
        sub.subscription_id.as_str(),
        "--status",
        "dead",
    ]))
    .await;
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(change_ids(&listed), [changes[0].change_id.to_string()]);

    let retried = run(with(&[
        "retry",
        "--account",
        sub.account_id.as_str(),
        "--subscription",
        sub.subscription_id.as_str(),
        "--change",
        changes[0].change_id.as_str(),
        "--reason",
        "fixed the receiver",
    ]))
    .await;
    assert!(
        retried.status.success(),
        "{}",
        String::from_utf8_lossy(&retried.stderr)
    );
    let out = String::from_utf8_lossy(&retried.stdout);
    assert!(out.contains("dead → pending"), "{out}");
    w.pipeline.pump().await.unwrap();
    assert_eq!(
        w.delivery_status(&sub, &changes[0]).await,
        DeliveryStatus::Delivered
    );

    // An API refusal is printed from its problem document, with a failing exit code.
    let again = run(with(&[
        "resume",
        "--account",
        sub.account_id.as_str(),
        "--subscription",
        sub.subscription_id.as_str(),
        "--reason",
        "r",
    ]))
    .await;
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("only a paused subscription"));
    let audit = run(with(&[
        "history",
        "audit",
        "--account",
        sub.account_id.as_str(),
        "--subscription",
        sub.subscription_id.as_str(),
    ]))
    .await;
    assert!(String::from_utf8_lossy(&audit.stdout).contains("fixed the receiver"));
    server.abort();
}

/// `rhythm audit verify` against a local API server: an untouched history is intact (exit 0); an
/// entry overwritten in the table, as a principal with PutItem on the prefix could, is named
/// (exit 1).
#[tokio::test]
async fn rhythm_audit_verify_names_an_entry_replaced_in_the_table_and_exits_non_zero() {
    use shared::store::audit::{self, AuditScope};
    use shared::store::{keys, read, write};
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let (addr, server) = local::api_server::serve_loopback(w.api_state())
        .await
        .unwrap();
    let url = format!("http://{addr}");
    let account = tenant.account_id.as_str().to_owned();
    let verify = |url: String, account: String| async move {
        tokio::task::spawn_blocking(move || {
            rhythm(&[
                "--api-url",
                &url,
                "--token",
                OPERATOR_TOKEN,
                "audit",
                "verify",
                "--account",
                &account,
            ])
        })
        .await
        .unwrap()
    };
    let intact = verify(url.clone(), account.clone()).await;
    let out = String::from_utf8_lossy(&intact.stdout);
    assert!(intact.status.success(), "{out}");
    assert!(out.contains("intact"), "{out}");

    // The oldest entry (the account's creation), rewritten in place.
    let (dynamo, table) = (
        &w.pipeline.stack.clients.dynamo,
        w.pipeline.stack.config.delivery_table.as_str(),
    );
    let (entries, _) = audit::list(
        dynamo,
        table,
        AuditScope::Account(&tenant.account_id),
        50,
        None,
    )
    .await
    .unwrap();
    let first = entries.last().unwrap();
    let (pk, sk) = (
        keys::audit_pk(&tenant.account_id),
        keys::audit_sk(first.at, &first.audit_id),
    );
    let mut item = read::get(dynamo, table, &pk, &sk).await.unwrap().unwrap();
    item.insert("operator".into(), shared::store::expr::s("someone else"));
    assert!(write::send(dynamo, write::put(table, item).unwrap())
        .await
        .unwrap()
        .applied());
    let broken = verify(url, account).await;
    let out = String::from_utf8_lossy(&broken.stdout);
    assert_eq!(broken.status.code(), Some(1), "{out}");
    assert!(out.contains("BROKEN at entry 1"), "{out}");
    assert!(out.contains(first.audit_id.as_str()), "{out}");
    server.abort();
}
