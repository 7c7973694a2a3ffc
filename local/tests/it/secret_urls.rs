//! A webhook or Slack URL is a credential (a Slack incoming webhook's path is its secret; an
//! endpoint's may carry a token): when a send fails — the connection refused, the attempt timed
//! out — neither the error stored for people nor what the function logs names the URL.

use local::receiver::{Receiver, Reply};
use local::testkit::World;
use shared::delivery::worker::internal::InternalRegistry;
use shared::delivery::worker::webhook::WebhookAdapter;
use shared::domain::ssrf::TargetPolicy;
use shared::notify::notice_service::NewNotice;
use shared::store::notice::{Contact, Recipient};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::instrument::WithSubscriber;

/// What a future logs at the functions' level (`info`, as `shared::runtime` sets it), with its
/// output.
async fn logged<F: Future>(f: F) -> (F::Output, String) {
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .finish();
    let out = f.with_subscriber(subscriber).await;
    let text = String::from_utf8_lossy(&captured.0.lock().unwrap()).into_owned();
    (out, text)
}

/// A loopback address nothing listens on (bound, then released): connecting is refused.
fn refusing_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    drop(listener);
    address
}

/// Neither the secret part of the URL nor its host and port.
fn assert_no_url(text: &str, secret: &str, address: &str, what: &str) {
    assert!(
        !text.contains(secret),
        "{what} names the URL's secret: {text}"
    );
    assert!(!text.contains(address), "{what} names the URL: {text}");
}

#[tokio::test]
async fn a_failed_slack_send_stores_and_logs_its_error_without_the_webhook_url() {
    let w = World::new().await;
    let n = &w.notify;
    let secret = "T0SECRET/B0SECRET/xoxb5ecret5lack";
    let address = refusing_address();
    let notice = n
        .create(NewNotice {
            recipients: vec![Recipient::Contact(Contact {
                id: "ops".into(),
                email: None,
                slack_webhook_url: Some(format!("http://{address}/services/{secret}")),
            })],
            channels: vec!["slack".into()],
            subject: "Deploy finished".into(),
            body: "All green.".into(),
            deadline: None,
            supersede_key: None,
            idempotency_key: ulid::Ulid::new().to_string(),
            reason: None,
        })
        .await;
    let (_, logs) = logged(n.drain()).await;
    let d = n.delivery(&notice.request.notice_id, "slack-0").await;
    let error = d.last_error.clone().expect("the failed send is kept");
    assert!(error.starts_with("Slack call failed"), "{error}");
    assert_no_url(&error, secret, &address, "the stored error");
    let history = serde_json::to_string(&d.history).unwrap();
    assert_no_url(&history, secret, &address, "the delivery's history");
    assert!(!logs.is_empty(), "the notification worker logged nothing");
    assert_no_url(&logs, secret, &address, "the log");
}

#[tokio::test]
async fn a_failed_webhook_attempt_stores_and_logs_its_error_without_the_endpoint_url() {
    let w = World::new().await;
    let hanging = Receiver::start().await;
    hanging.set_default(Reply::Hang(Duration::from_secs(5)));
    let secret = "hooks/tok_5ecretEndpointToken";
    let refused_at = refusing_address();
    let hanging_at = hanging
        .url("/")
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let worker = w.worker_with(
        WebhookAdapter::new(TargetPolicy::LOCAL_DEMO, Duration::from_millis(500)),
        InternalRegistry::default(),
    );
    for (address, how) in [
        (&refused_at, "connection refused"),
        (&hanging_at, "timeout"),
    ] {
        // An account of its own, so that its change makes only this delivery.
        let account = w.account().await;
        let integration = w
            .integration(&account.account_id)
            .url(format!("http://{address}/{secret}?token=5ecretQuery"))
            .await;
        let sub = w.subscribe(&integration).await;
        let change = w.change(&account.account_id).await;
        w.pipeline.ingest_pending().await.unwrap();
        w.pipeline.dispatch_pending().await.unwrap();
        let queue = w.pipeline.stack.queue("DeliveryQueue");
        let messages = queue.receive().await.unwrap();
        assert_eq!(messages.len(), 1, "{how}");
        let (_, logs) = logged(worker.handle(queue.event(&messages).unwrap())).await;
        let d = w
            .pipeline
            .delivery(&account.account_id, &change.change_id, &sub.subscription_id)
            .await
            .unwrap();
        let attempt = &d.attempt_log[0];
        assert_eq!(attempt.class, "transient", "{how}");
        let detail = attempt.detail.clone().unwrap_or_default();
        assert!(detail.contains("error sending request"), "{how}: {detail}");
        for text in [&detail, &logs] {
            assert_no_url(text, secret, address, how);
            assert!(!text.contains("5ecretQuery"), "{how}: {text}");
        }
        assert!(logs.contains("delivery attempt"), "{how}: {logs}");
    }
}
