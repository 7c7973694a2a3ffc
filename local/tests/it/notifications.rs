//! Notification delivery (`docs/lifecycles.md#notification-delivery`) against the emulator:
//! notices fanned out from the notification table's stream, the channel worker on the
//! notification queue (with its dead-letter queue), SES v2 captured by the emulator, Slack to a
//! loopback receiver, provider confirmations, settling and operator requeue. Test names say the
//! behaviour each one checks.

use aws_sdk_dynamodb::types::AttributeValue;
use local::queues::QueueReport;
use local::receiver::{Receiver, Reply};
use local::testkit::id;
use local::testkit::notifications::Notifications;
use local::testkit::{sample, World};
use serde_json::{json, Value};
use shared::clock::Clock;
use shared::domain::lifecycle::TransitionError;
use shared::domain::notice::NoticeStatus;
use shared::domain::notification_delivery::{
    requeue_condition, FailureReason, NotificationStatus as N, NotificationTrigger as NT,
    RequeueRefused, AMBIGUITY_TIMEOUT, MAX_HISTORY_EVENTS, MAX_RECEIVES, NOTIFICATION_LIFECYCLE,
};
use shared::domain::time::{Timestamp, HOUR, MINUTE, SECOND};
use shared::notify::confirm::{self, ConfirmOutcome, IntakeError, IntakeOutcome};
use shared::notify::notice_service::NewNotice;
use shared::notify::requeue::{requeue, RequeueError};
use shared::notify::settle::{settle_with, SettleBudget};
use shared::notify::sns::{self, SnsError};
use shared::notify::worker::WorkOutcome;
use shared::store::attrs::{inbox::INDEX as INBOX_INDEX, watch::INDEX as WATCH_INDEX};
use shared::store::console_inbox::inbox_key;
use shared::store::from_item;
use shared::store::notice::{
    self, notice_item, subscription_paused_notice, Contact, NoticeRecord, Recipient,
};
use shared::store::notice_progress::{Progress, PROGRESS_PREFIX};
use shared::store::notification_delivery::{
    delivery_sk, Effects, NotificationDelivery, DELIVERY_PREFIX,
};
use shared::store::notification_work::{work_sk, NotificationWork, WorkRow};
use std::sync::Arc;

/// The topic the test settings accept SNS messages from.
const TOPIC: &str = local::testkit::TEST_SNS_TOPIC;

fn contact(id: &str, email: Option<&str>, slack: Option<String>) -> Recipient {
    Recipient::Contact(Contact {
        id: id.into(),
        email: email.map(str::to_string),
        slack_webhook_url: slack,
    })
}

fn new_notice(recipients: Vec<Recipient>, channels: &[&str], subject: &str) -> NewNotice {
    NewNotice {
        recipients,
        channels: channels.iter().map(|c| c.to_string()).collect(),
        subject: subject.into(),
        body: format!("{subject}: body"),
        deadline: None,
        supersede_key: None,
        idempotency_key: ulid::Ulid::new().to_string(),
        reason: None,
    }
}

/// A notice to one recipient, `ops`, on Slack at `slack`.
fn ops_on_slack(slack: &Receiver, subject: &str) -> NewNotice {
    new_notice(
        vec![contact("ops", None, Some(slack.url("/h")))],
        &["slack"],
        subject,
    )
}

/// The emails the emulator captured for `to` (moto's SES backend, through its model data).
async fn captured_emails(to: &str) -> Vec<Value> {
    let endpoint = local::emulator::endpoint().await.unwrap();
    let data: Value = reqwest::get(format!("{endpoint}/moto-api/data.json"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    data["ses"]["Message"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|m| {
            m["destinations"]["ToAddresses"]
                .as_array()
                .is_some_and(|a| a.iter().any(|x| x == to))
        })
        .collect()
}

fn unique_email(tag: &str) -> String {
    format!(
        "{tag}-{}@example.com",
        ulid::Ulid::new().to_string().to_lowercase()
    )
}

/// The process's provider-event settings for tests: our topic, the locally generated SNS
/// certificate (no network), and a secret for the generic signed form.
fn install_settings() -> &'static confirm::ProviderEventSettings {
    local::testkit::provider_event_settings()
}

/// A signed SNS notification of an SES event about message `ses_id`.
fn ses_notification(
    sns_id: &str,
    event_type: &str,
    ses_id: &str,
    version: &str,
    at: Timestamp,
) -> Vec<u8> {
    let payload = match event_type {
        "Bounce" => json!({
            "eventType": "Bounce",
            "mail": {"messageId": ses_id, "timestamp": "2026-01-01T00:00:00.000Z"},
            "bounce": {"bounceType": "Permanent", "timestamp": "2026-01-01T00:00:09.000Z",
                       "bouncedRecipients": [{"diagnosticCode": "smtp; 550 5.1.1 user unknown"}]}
        }),
        other => json!({
            "eventType": other,
            "mail": {"messageId": ses_id, "timestamp": "2026-01-01T00:00:00.000Z"},
            "delivery": {"timestamp": "2026-01-01T00:00:05.000Z", "smtpResponse": "250 2.0.0 OK"}
        }),
    };
    let m = sns::local::notification(TOPIC, sns_id, &payload.to_string(), version, at);
    serde_json::to_vec(&m).unwrap()
}

// ---------------------------------------- claim race, backoff, exhaustion, cancellation, requeue

#[tokio::test]
async fn a_foreign_topic_or_a_stale_sns_message_is_refused_before_any_certificate_is_fetched() {
    let w = World::new().await;
    let n = &w.notify;
    let http = Arc::new(sns::local::test_http());
    let settings = confirm::ProviderEventSettings::from_values(Some(TOPIC), None, http.clone());
    let fetched = || http.fetched.lock().unwrap().len();
    let foreign = sns::local::notification(
        "arn:aws:sns:us-east-1:999999999999:someone-else",
        "sns-foreign",
        &json!({"eventType": "Delivery", "mail": {"messageId": "ses-x"}}).to_string(),
        "2",
        n.now(),
    );
    let body = serde_json::to_vec(&foreign).unwrap();
    assert!(matches!(
        confirm::intake_sns(&n.store, &settings, &body, n.now()).await,
        Err(IntakeError::ForeignTopic(_))
    ));
    let two_hours_ago = Timestamp(n.now().millis() - 2 * HOUR.as_millis() as i64);
    let stale = ses_notification("sns-stale", "Delivery", "ses-x", "2", two_hours_ago);
    assert!(matches!(
        confirm::intake_sns(&n.store, &settings, &stale, n.now()).await,
        Err(IntakeError::Signature(SnsError::Stale(_)))
    ));
    assert_eq!(fetched(), 0, "no certificate fetched for either");
    // A fresh message of our topic is verified (its certificate fetched) and handled.
    let mut bye = sns::local::notification(TOPIC, "sns-bye", "unsubscribed", "2", n.now());
    bye.kind = "UnsubscribeConfirmation".into();
    bye.token = Some("tok".into());
    bye.subscribe_url =
        Some("https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription".into());
    sns::local::sign(&mut bye, sns::local::TEST_KEY_PEM).unwrap();
    let body = serde_json::to_vec(&bye).unwrap();
    assert_eq!(
        confirm::intake_sns(&n.store, &settings, &body, n.now())
            .await
            .unwrap(),
        IntakeOutcome::SubscriptionConfirmed
    );
    assert_eq!(fetched(), 1);
}

#[tokio::test]
async fn lets_only_one_of_two_consumers_racing_for_the_send_win_it() {
    let w = World::new().await;
    let n = &w.notify;
    let slack = Receiver::start().await;
    slack.set_default(Reply::Full {
        status: 200,
        headers: vec![],
        body: "ok".into(),
    });
    let notice = n
        .create(new_notice(
            vec![contact("ops", None, Some(slack.url("/services/T/B/x")))],
            &["slack"],
            "Race",
        ))
        .await;
    let (work, count) = n.receive_work().await;
    assert_eq!(work.notice_id, notice.request.notice_id);

    // Two consumers handle the same work at the same time.
    let (a, b) = tokio::join!(
        n.worker.process(&work, count),
        n.worker.process(&work, count)
    );
    let outcomes = [a.unwrap(), b.unwrap()];
    let sent = outcomes
        .iter()
        .filter(|o| matches!(o, WorkOutcome::Sent { .. }))
        .count();
    // The other found the claim taken (or, had it read late, the delivery already settled).
    let held = outcomes
        .iter()
        .filter(|o| {
            matches!(
                o,
                WorkOutcome::HeldByAnotherConsumer | WorkOutcome::Ignored(_)
            )
        })
        .count();
    assert_eq!((sent, held), (1, 1), "{outcomes:?}");
    assert_eq!(slack.count(), 1, "exactly one send");
    let d = n.delivery(&notice.request.notice_id, "slack-0").await;
    assert_eq!(d.status, N::Delivered);
    assert_eq!(
        d.history.iter().filter(|h| h.kind == "claimed").count(),
        1,
        "one claim"
    );

    // The conditional claim itself decides: two claims from the same read, exactly one stored.
    let second = n
        .create(new_notice(
            vec![contact("ops", None, Some(slack.url("/services/T/B/x")))],
            &["slack"],
            "Race 2",
        ))
        .await;
    let queued = n.delivery(&second.request.notice_id, "slack-0").await;
    let claim = |token: &str| {
        let mut next = queued.clone();
        next.status = N::Sending;
        next.claim_token = Some(token.into());
        next.claimed_at = Some(n.now());
        next
    };
    let (x, y) = tokio::join!(
        n.store
            .transition(&queued, claim("x"), NT::Claim, Effects::none()),
        n.store
            .transition(&queued, claim("y"), NT::Claim, Effects::none())
    );
    let won: Vec<_> = [x.unwrap(), y.unwrap()].into_iter().flatten().collect();
    assert_eq!(won.len(), 1, "exactly one claim is stored");
    let stored = n.delivery(&second.request.notice_id, "slack-0").await;
    assert_eq!(stored.claim_token, won[0].claim_token);
}

#[tokio::test]
async fn answers_a_429_as_a_retryable_failure_carrying_retry_after() {
    let w = World::new().await;
    let n = &w.notify;
    let slack = Receiver::start().await;
    slack.script([Reply::Full {
        status: 429,
        headers: vec![("Retry-After".into(), "120".into())],
        body: "rate_limited".into(),
    }]);
    let notice = n
        .create(new_notice(
            vec![contact("ops", None, Some(slack.url("/services/T/B/x")))],
            &["slack"],
            "Throttled",
        ))
        .await;
    let before = n.now();
    let mut report = QueueReport::default();
    let queue = n.queue();
    queue
        .drain_once(&mut |e| n.worker.handle(e), &mut report)
        .await
        .unwrap();
    assert_eq!(slack.count(), 1);
    assert_eq!(
        (report.messages, report.failures, report.deleted),
        (1, 1, 0),
        "the message is reported as a batch item failure, not deleted"
    );

    let d = n.delivery(&notice.request.notice_id, "slack-0").await;
    assert_eq!(d.status, N::Queued, "back to queued: receives remain");
    // The first receive's backoff is 24–36 s; Slack's longer Retry-After wins.
    assert_eq!(d.not_before, Some(before.plus(120 * SECOND)));
    assert!(d.last_error.as_deref().unwrap().contains("429"));
    let retry = d.history.iter().find(|h| h.kind == "retry").unwrap();
    assert!(retry.detail.as_deref().unwrap().contains("again in 120 s"));
    assert!(d.claim_token.is_none());
    assert!(
        n.item(&notice.request.notice_id, &work_sk("slack-0"))
            .await
            .is_some(),
        "the work stays"
    );
    // SQS hides the message for the delay instead of giving it back at once.
    let (visible, in_flight) = queue.depth().await.unwrap();
    assert_eq!((visible, in_flight), (0, 1));
    assert!(queue.receive().await.unwrap().is_empty());
    assert_eq!(
        n.store
            .progress(&notice.request.notice_id)
            .await
            .unwrap()
            .count(N::Queued),
        1
    );
}

/// Runs a Slack delivery that always fails retryably through all eight receives.
pub(crate) async fn exhaust(
    n: &Notifications,
    slack: &Receiver,
    subject: &str,
) -> (NoticeRecord, String) {
    exhaust_keyed(n, slack, subject, None).await
}

/// The operator's requeue of `notice_id`'s delivery `key`, now.
async fn requeue_now(
    n: &Notifications,
    notice_id: &shared::ids::NoticeId,
    key: &str,
) -> (NotificationDelivery, WorkRow) {
    requeue(
        &n.store,
        notice_id,
        key,
        "op@rhythm",
        "provider fixed",
        n.now(),
    )
    .await
    .unwrap()
}

/// [`exhaust`] of a notice with `supersede_key`.
async fn exhaust_keyed(
    n: &Notifications,
    slack: &Receiver,
    subject: &str,
    supersede_key: Option<&str>,
) -> (NoticeRecord, String) {
    slack.set_default(Reply::Status(500));
    let mut new = new_notice(
        vec![contact("ops", None, Some(slack.url("/services/T/B/x")))],
        &["slack"],
        subject,
    );
    new.supersede_key = supersede_key.map(str::to_string);
    let notice = n.create(new).await;
    let original_dispatch = n
        .store
        .work(&notice.request.notice_id, "slack-0")
        .await
        .unwrap()
        .unwrap()
        .dispatch_id;
    let mut queue = n.queue();
    queue.redeliver_failures_now = true;
    let mut report = QueueReport::default();
    for receive in 1..=MAX_RECEIVES {
        // Past any backoff: the manual clock moves, the queue hands the message back at once.
        n.clock.advance(HOUR);
        let handed = queue
            .drain_once(&mut |e| n.worker.handle(e), &mut report)
            .await
            .unwrap();
        assert_eq!(handed, 1, "receive {receive}");
        let d = n.delivery(&notice.request.notice_id, "slack-0").await;
        if receive < MAX_RECEIVES {
            assert_eq!(d.status, N::Queued, "receive {receive}");
        } else {
            assert_eq!(d.status, N::Failed);
            assert_eq!(d.failure_reason, Some(FailureReason::AttemptsExhausted));
        }
    }
    assert_eq!(report.failures, MAX_RECEIVES as usize);
    assert_eq!(slack.count(), MAX_RECEIVES as usize);
    (notice, original_dispatch)
}

#[tokio::test]
async fn fails_the_delivery_attempts_exhausted_on_the_last_receive_and_gives_the_item_back_at_once_to_reach_the_dead_letter_queue(
) {
    let w = World::new().await;
    let n = &w.notify;
    let slack = Receiver::start().await;
    let (notice, _) = exhaust(n, &slack, "Exhausted").await;
    let d = n.delivery(&notice.request.notice_id, "slack-0").await;
    assert!(d.failed_at.is_some());
    assert!(d.last_error.as_deref().unwrap().contains("500"));
    assert!(
        n.item(&notice.request.notice_id, &work_sk("slack-0"))
            .await
            .is_none(),
        "the work row goes with the terminal failure"
    );
    let failures = n.metrics.failures();
    assert_eq!(failures.len(), 1, "one terminal-failure metric");
    assert_eq!(failures[0].reason, "attempts_exhausted");
    assert_eq!(failures[0].channel, "slack");

    // The message was given back at once (visibility 0, not the backoff) ...
    let queue = n.queue();
    let (visible, in_flight) = queue.depth().await.unwrap();
    assert_eq!((visible, in_flight), (1, 0), "given back at once");
    // ... so the next receive moves it to the dead-letter queue (maxReceiveCount 8).
    assert!(queue.receive().await.unwrap().is_empty());
    let dlq = w.pipeline.stack.queue("NotificationDeadLetterQueue");
    let dead = dlq.receive().await.unwrap();
    assert_eq!(dead.len(), 1, "the message reached the dead-letter queue");
    let work: NotificationWork = serde_json::from_str(dead[0].body.as_deref().unwrap()).unwrap();
    assert_eq!(
        (work.notice_id.as_str(), work.delivery_key.as_str()),
        (notice.request.notice_id.as_str(), "slack-0")
    );
    assert_eq!(slack.count(), MAX_RECEIVES as usize, "no ninth send");
}

#[tokio::test]
async fn cancels_not_sends_a_delivery_whose_notification_was_superseded_after_it_was_queued() {
    let w = World::new().await;
    let n = &w.notify;
    let slack = Receiver::start().await;
    let ops = || vec![contact("ops", None, Some(slack.url("/services/T/B/x")))];

    // A is queued (its message is on the queue), then B with the same key replaces it.
    let mut a = new_notice(ops(), &["slack"], "Maintenance at 10:00");
    a.supersede_key = Some("maintenance".into());
    let a = n.create(a).await;
    assert_eq!(
        n.delivery(&a.request.notice_id, "slack-0").await.status,
        N::Queued
    );
    n.clock.advance(SECOND);
    let mut b = new_notice(ops(), &["slack"], "Maintenance moved to 11:00");
    b.supersede_key = Some("maintenance".into());
    let b = n.create(b).await;

    let a_now = n.store.notice(&a.request.notice_id).await.unwrap().unwrap();
    assert_eq!(a_now.status, NoticeStatus::Superseded);
    assert_eq!(a_now.superseded_by.as_ref(), Some(&b.request.notice_id));
    let da = n.delivery(&a.request.notice_id, "slack-0").await;
    assert_eq!(da.status, N::Cancelled);
    assert!(
        n.item(&a.request.notice_id, &work_sk("slack-0"))
            .await
            .is_none(),
        "its dispatch work is deleted"
    );

    // Both messages are handled: A's is dropped, B's is sent.
    n.drain().await;
    let got = slack.received();
    assert_eq!(got.len(), 1, "only the replacement is sent");
    assert!(got[0].json()["text"]
        .as_str()
        .unwrap()
        .contains("moved to 11:00"));
    assert_eq!(
        n.delivery(&b.request.notice_id, "slack-0").await.status,
        N::Delivered
    );
    assert_eq!(
        n.delivery(&a.request.notice_id, "slack-0").await.status,
        N::Cancelled
    );

    // The consumer's own guard: the replacement reached the notice but not yet its queued
    // delivery when the message arrives — the consumer cancels instead of sending.
    let c = n.create(new_notice(ops(), &["slack"], "Stale")).await;
    let superseded = notice::supersede(
        &n.store.table,
        &c.request.notice_id,
        &b.request.notice_id,
        n.now(),
    )
    .unwrap();
    assert!(n.store.send(superseded).await.unwrap().applied());
    let (work, count) = n.receive_work().await;
    assert_eq!(
        n.worker.process(&work, count).await.unwrap(),
        WorkOutcome::Cancelled
    );
    let dc = n.delivery(&c.request.notice_id, "slack-0").await;
    assert_eq!(dc.status, N::Cancelled);
    assert!(n
        .item(&c.request.notice_id, &work_sk("slack-0"))
        .await
        .is_none());
    assert_eq!(slack.count(), 1, "still only the replacement was sent");
    let progress = n.store.progress(&c.request.notice_id).await.unwrap();
    assert_eq!((progress.count(N::Cancelled), progress.total), (1, 1));
}

#[tokio::test]
async fn queues_a_delivery_that_ran_out_of_receives_again_with_its_work_row_and_nothing_else() {
    let w = World::new().await;
    let n = &w.notify;
    let slack = Receiver::start().await;
    let (notice, old_dispatch) = exhaust(n, &slack, "Requeue me").await;
    let before = n.partition(&notice.request.notice_id).await;
    let failed = n.delivery(&notice.request.notice_id, "slack-0").await;
    assert!(!before.contains_key(&work_sk("slack-0")));
    n.clock.advance(MINUTE);

    let (queued, work) = requeue_now(n, &notice.request.notice_id, "slack-0").await;
    assert_eq!(queued.status, N::Queued);
    assert_ne!(work.dispatch_id, old_dispatch, "fresh dispatch work");

    let after = n.partition(&notice.request.notice_id).await;
    // Its work row ...
    let row: WorkRow = from_item(after[&work_sk("slack-0")].clone()).unwrap();
    assert_eq!(row, work);
    // ... and nothing else: the delivery changed only in its status (and what the status
    // implies), no other item of the notice appeared or changed except the progress counters.
    let d_before = &before[&delivery_sk("slack-0")];
    let d_after = &after[&delivery_sk("slack-0")];
    let expected_changes = [
        "status",
        "failure_reason",
        "failed_at",
        "version",
        "updated_at",
        "history",
        // The retention a failed delivery carries; queued work never expires.
        "expires_at",
        // Its place on its account's list of failed deliveries (the `trouble` index).
        "trouble_key",
        "trouble_sort",
    ];
    assert!(d_before.contains_key("expires_at") && !d_after.contains_key("expires_at"));
    assert!(d_before.contains_key("trouble_key") && !d_after.contains_key("trouble_key"));
    for (k, v) in d_before {
        if !expected_changes.contains(&k.as_str()) {
            assert_eq!(d_after.get(k), Some(v), "{k} unchanged");
        }
    }
    for k in d_after.keys() {
        assert!(
            d_before.contains_key(k) || expected_changes.contains(&k.as_str()),
            "{k} is new"
        );
    }
    assert!(!d_after.contains_key("failure_reason"));
    let d_now: NotificationDelivery = from_item(d_after.clone()).unwrap();
    assert_eq!(d_now.history.len(), failed.history.len() + 1);
    assert_eq!(d_now.history.last().unwrap().kind, "requeued");
    for (sk, item) in &before {
        if sk.starts_with(DELIVERY_PREFIX) || sk.starts_with(PROGRESS_PREFIX) {
            continue;
        }
        // The notice changes only in its retention, which the requeue pushes out
        // (notifications::retention).
        let mut item = item.clone();
        let mut now = after.get(sk).cloned();
        if sk == notice::NOTICE_SK {
            let seconds =
                |v: Option<AttributeValue>| -> i64 { v.unwrap().as_n().unwrap().parse().unwrap() };
            assert!(
                seconds(item.remove("expires_at"))
                    < seconds(now.as_mut().unwrap().remove("expires_at"))
            );
        }
        assert_eq!(now, Some(item), "{sk} unchanged");
    }
    assert_eq!(after.len(), before.len() + 1, "only the work row is new");
    let progress = n.store.progress(&notice.request.notice_id).await.unwrap();
    assert_eq!(
        (progress.count(N::Queued), progress.count(N::Failed)),
        (1, 0)
    );

    // A second requeue is refused by storage's separate condition (it is queued now).
    assert!(matches!(
        requeue(
            &n.store,
            &notice.request.notice_id,
            "slack-0",
            "op",
            "again",
            n.now()
        )
        .await,
        Err(RequeueError::Refused(RequeueRefused::Lifecycle(_)))
    ));

    // The later dispatcher run: the work row's insertion publishes fresh work, which is sent.
    slack.set_default(Reply::Status(200));
    n.pump().await;
    let d = n.delivery(&notice.request.notice_id, "slack-0").await;
    assert_eq!(d.status, N::Delivered);
    assert_eq!(slack.count(), MAX_RECEIVES as usize + 1);
    // The dead-lettered message names the old dispatch: redriven, it is stale and dropped.
    let stale = NotificationWork {
        notice_id: notice.request.notice_id.clone(),
        delivery_key: "slack-0".into(),
        dispatch_id: old_dispatch,
    };
    assert!(matches!(
        n.worker.process(&stale, 1).await.unwrap(),
        WorkOutcome::Ignored(_)
    ));
}

#[tokio::test]
async fn refuses_an_ambiguous_or_provider_failure_requeue_with_a_clear_error() {
    let w = World::new().await;
    let n = &w.notify;
    let slack = Receiver::start().await;
    slack.set_default(Reply::Full {
        status: 400,
        headers: vec![],
        body: "invalid_payload".into(),
    });
    let permanent = n
        .create(new_notice(
            vec![contact("ops", None, Some(slack.url("/services/T/B/x")))],
            &["slack"],
            "Refused",
        ))
        .await;
    n.drain().await;
    let d = n.delivery(&permanent.request.notice_id, "slack-0").await;
    assert_eq!(d.status, N::Failed);
    assert!(matches!(d.failure_reason, Some(FailureReason::Provider(_))));
    assert!(matches!(
        requeue(
            &n.store,
            &permanent.request.notice_id,
            "slack-0",
            "op",
            "again",
            n.now()
        )
        .await,
        Err(RequeueError::Refused(
            RequeueRefused::PermanentProviderFailure(_)
        ))
    ));

    // An ambiguous one: claimed, then the consumer vanished; settling fails it after 15 min.
    let ambiguous = n
        .create(new_notice(
            vec![contact("ops", None, Some(slack.url("/services/T/B/x")))],
            &["slack"],
            "Vanished",
        ))
        .await;
    let queued = n.delivery(&ambiguous.request.notice_id, "slack-0").await;
    let mut claim = queued.clone();
    claim.status = N::Sending;
    claim.claim_token = Some("gone".into());
    claim.claimed_at = Some(n.now());
    n.store
        .transition(&queued, claim, NT::Claim, Effects::none())
        .await
        .unwrap()
        .unwrap();
    n.clock.advance(AMBIGUITY_TIMEOUT);
    let report = settle_with(
        &n.store,
        &n.metrics,
        "test",
        n.now(),
        SettleBudget::default(),
    )
    .await
    .unwrap();
    assert_eq!(report.failed_ambiguous, 1);
    let err = requeue(
        &n.store,
        &ambiguous.request.notice_id,
        "slack-0",
        "op",
        "again",
        n.now(),
    )
    .await
    .unwrap_err();
    assert!(matches!(
        err,
        RequeueError::Refused(RequeueRefused::Ambiguous)
    ));
    assert_eq!(
        err.to_string(),
        "an ambiguous failure does not qualify for requeue: the provider may already have sent it"
    );
    assert_eq!(
        n.delivery(&ambiguous.request.notice_id, "slack-0")
            .await
            .status,
        N::Failed,
        "unchanged"
    );
}

// ------------------------------------------------------------ invalid moves, refused by storage

/// Attempts `current → to` by `trigger` as a conditional write against the emulator and asserts
/// that storage refuses it and the item is unchanged.
async fn assert_storage_refuses(
    n: &Notifications,
    current: &NotificationDelivery,
    trigger: NT,
    to: N,
) {
    let before = n
        .item(&current.notice_id, &delivery_sk(&current.delivery_key))
        .await
        .unwrap();
    let mut next = current.clone();
    next.status = to;
    next.updated_at = n.now();
    let written = if trigger == NT::OperatorRequeue {
        n.store
            .transition_on(
                current,
                next,
                trigger,
                Effects::none(),
                Some(requeue_condition()),
            )
            .await
    } else {
        n.store
            .transition(current, next, trigger, Effects::none())
            .await
    };
    assert!(
        written.unwrap().is_none(),
        "storage refused {} → {to} by {trigger:?}",
        current.status
    );
    let after = n
        .item(&current.notice_id, &delivery_sk(&current.delivery_key))
        .await
        .unwrap();
    assert_eq!(before, after, "the delivery is unchanged");
}

fn ruled_out_why(from: N, to: N) -> &'static str {
    match NOTIFICATION_LIFECYCLE.check(from, NT::Claim, to) {
        Err(TransitionError::ForbiddenByRule { why, .. }) => why,
        other => panic!("{from} → {to} is not a move the lifecycle rules out: {other:?}"),
    }
}

#[tokio::test]
async fn refuses_in_storage_a_delivered_delivery_returning_to_the_queue() {
    let w = World::new().await;
    let n = &w.notify;
    let notice = n
        .create(new_notice(
            vec![Recipient::Address("u1".into())],
            &["console"],
            "Hi",
        ))
        .await;
    let d = n.delivery(&notice.request.notice_id, "console-0").await;
    assert_eq!(d.status, N::Delivered);
    assert_eq!(
        ruled_out_why(N::Delivered, N::Queued),
        "a delivered message never goes back to the queue"
    );
    // Every way the table reaches `queued`: a retry and an operator requeue.
    assert_storage_refuses(n, &d, NT::RetryableResult, N::Queued).await;
    assert_storage_refuses(n, &d, NT::OperatorRequeue, N::Queued).await;
}

#[tokio::test]
async fn refuses_in_storage_a_competing_consumer_acquiring_an_existing_sending_claim() {
    let w = World::new().await;
    let n = &w.notify;
    let slack = Receiver::start().await;
    let notice = n.create(ops_on_slack(&slack, "Claimed")).await;
    let queued = n.delivery(&notice.request.notice_id, "slack-0").await;
    let mut claim = queued.clone();
    claim.status = N::Sending;
    claim.claim_token = Some("first".into());
    claim.claimed_at = Some(n.now());
    let sending = n
        .store
        .transition(&queued, claim, NT::Claim, Effects::none())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        ruled_out_why(N::Sending, N::Sending),
        "a second consumer cannot take a claim that is already held"
    );
    // With the current version, only the status condition stands in the way.
    assert_storage_refuses(n, &sending, NT::Claim, N::Sending).await;
    // And a consumer that read it while it was still queued loses on the version.
    assert_storage_refuses(n, &queued, NT::Claim, N::Sending).await;
    assert_eq!(
        n.delivery(&notice.request.notice_id, "slack-0")
            .await
            .claim_token
            .as_deref(),
        Some("first")
    );
}

#[tokio::test]
async fn refuses_in_storage_a_failed_delivery_sending_without_a_requeue() {
    let w = World::new().await;
    let n = &w.notify;
    let slack = Receiver::start().await;
    slack.set_default(Reply::Status(400));
    let notice = n.create(ops_on_slack(&slack, "Fails")).await;
    n.drain().await;
    let failed = n.delivery(&notice.request.notice_id, "slack-0").await;
    assert_eq!(failed.status, N::Failed);
    assert_eq!(
        ruled_out_why(N::Failed, N::Sending),
        "a retry goes through an operator requeue first, and an ambiguous failure never qualifies"
    );
    assert_storage_refuses(n, &failed, NT::Claim, N::Sending).await;
}

#[tokio::test]
async fn refuses_in_storage_a_skipped_delivery_returning_to_the_queue() {
    let w = World::new().await;
    let n = &w.notify;
    // No Slack webhook for this recipient: the adapter reports it unavailable.
    let notice = n
        .create(new_notice(
            vec![contact("ops", None, None)],
            &["slack"],
            "Nowhere",
        ))
        .await;
    n.drain().await;
    let skipped = n.delivery(&notice.request.notice_id, "slack-0").await;
    assert_eq!(skipped.status, N::Skipped);
    assert_eq!(
        skipped.skip_reason.as_deref(),
        Some("recipient ops has no Slack webhook")
    );
    assert_eq!(
        ruled_out_why(N::Skipped, N::Queued),
        "a skipped delivery keeps its reason and stays final"
    );
    assert_storage_refuses(n, &skipped, NT::RetryableResult, N::Queued).await;
    assert_storage_refuses(n, &skipped, NT::OperatorRequeue, N::Queued).await;
}

// --------------------------------------------------------------------- channels and notices

#[tokio::test]
async fn starts_console_deliveries_delivered_in_the_console_store() {
    let w = World::new().await;
    let n = &w.notify;
    let notice = n
        .create(new_notice(
            vec![
                Recipient::Address("user-1".into()),
                Recipient::Address("user-2".into()),
            ],
            &["console"],
            "Welcome",
        ))
        .await;
    assert_eq!(notice.status, NoticeStatus::Active);
    for key in ["console-0", "console-1"] {
        let d = n.delivery(&notice.request.notice_id, key).await;
        assert_eq!(d.status, N::Delivered);
        assert_eq!(d.subject.as_deref(), Some("Welcome"));
        assert!(d.delivered_at.is_some());
        assert!(n
            .item(&notice.request.notice_id, &work_sk(key))
            .await
            .is_none());
    }
    assert_eq!(n.queue().depth().await.unwrap(), (0, 0), "nothing to send");
    let progress = n.store.progress(&notice.request.notice_id).await.unwrap();
    assert_eq!((progress.count(N::Delivered), progress.total), (2, 2));
    // The recipient's inbox lists it.
    let inbox = w
        .pipeline
        .stack
        .clients
        .dynamo
        .query()
        .table_name(&w.pipeline.stack.config.notification_table)
        .index_name(INBOX_INDEX)
        .key_condition_expression("inbox_key = :k")
        .expression_attribute_values(":k", AttributeValue::S(inbox_key(&n.account, "user-2")))
        .send()
        .await
        .unwrap()
        .items
        .unwrap_or_default();
    assert_eq!(inbox.len(), 1);
    assert_eq!(inbox[0]["subject"], AttributeValue::S("Welcome".into()));
}

#[tokio::test]
async fn sends_email_through_ses_and_the_emulator_captures_it() {
    let w = World::new().await;
    let n = &w.notify;
    let to = unique_email("reader");
    let notice = n
        .create(new_notice(
            vec![Recipient::Address(to.clone())],
            &["email"],
            "Your weekly summary",
        ))
        .await;
    n.drain().await;
    let d = n.delivery(&notice.request.notice_id, "email-0").await;
    assert_eq!(
        d.status,
        N::Sent,
        "sent; delivered waits for SES's confirmation"
    );
    assert_eq!(d.provider.as_deref(), Some("ses"));
    let message_id = d.provider_ref.clone().unwrap();
    let emails = captured_emails(&to).await;
    assert_eq!(emails.len(), 1, "{emails:?}");
    assert_eq!(emails[0]["id"], message_id.as_str());
    assert_eq!(emails[0]["subject"], "Your weekly summary");
    assert_eq!(
        emails[0]["source"],
        w.pipeline.stack.config.notification_sender.as_str()
    );
    assert_eq!(emails[0]["body"], "Your weekly summary: body");
    // The provider reference leads back to the delivery.
    let found = confirm::delivery_of(&n.store, "ses", &message_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.delivery_key, "email-0");

    // A recipient without an address is unreachable: skipped with the reason.
    let nobody = n
        .create(new_notice(
            vec![Recipient::Address("user-7".into())],
            &["email"],
            "x",
        ))
        .await;
    n.drain().await;
    let d = n.delivery(&nobody.request.notice_id, "email-0").await;
    assert_eq!(d.status, N::Skipped);
    assert_eq!(
        d.skip_reason.as_deref(),
        Some("recipient user-7 has no email address")
    );
}

#[tokio::test]
async fn posts_slack_to_the_incoming_webhook_and_the_post_confirms_delivery() {
    let w = World::new().await;
    let n = &w.notify;
    let slack = Receiver::start().await;
    slack.set_default(Reply::Full {
        status: 200,
        headers: vec![("x-slack-req-id".into(), "req-42".into())],
        body: "ok".into(),
    });
    let notice = n
        .create(new_notice(
            vec![contact(
                "ops",
                None,
                Some(slack.url("/services/T0/B0/secret")),
            )],
            &["slack"],
            "Deploy finished",
        ))
        .await;
    n.drain().await;
    let got = slack.received();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].method, "POST");
    assert_eq!(got[0].path, "/services/T0/B0/secret");
    assert_eq!(got[0].header("content-type"), Some("application/json"));
    assert_eq!(
        got[0].json(),
        json!({"text": "*Deploy finished*\nDeploy finished: body"})
    );
    let d = n.delivery(&notice.request.notice_id, "slack-0").await;
    assert_eq!(d.status, N::Delivered);
    assert_eq!(d.provider_ref.as_deref(), Some("req-42"));
    let kinds: Vec<&str> = d.history.iter().map(|h| h.kind.as_str()).collect();
    assert_eq!(kinds, ["queued", "claimed", "sent", "delivered"]);
    assert!(d.watch_at.is_none() && d.claim_token.is_none());
}

#[tokio::test]
async fn refreshes_the_progress_summary_on_every_transition() {
    let w = World::new().await;
    let n = &w.notify;
    let slack = Receiver::start().await;
    let to = unique_email("progress");
    let notice = n
        .create(new_notice(
            vec![
                contact("ops", Some(&to), Some(slack.url("/services/T/B/x"))),
                contact("finance", None, None),
            ],
            &["email", "slack", "console"],
            "Quarter closed",
        ))
        .await;
    let counts = |p: &Progress| {
        [N::Queued, N::Sending, N::Sent, N::Delivered, N::Skipped].map(|s| p.count(s))
    };
    let p = n.store.progress(&notice.request.notice_id).await.unwrap();
    assert_eq!(p.total, 6);
    assert_eq!(counts(&p), [4, 0, 0, 2, 0], "after the fan-out");
    assert_eq!(p.counts.len(), 10, "every state is reported, zero included");

    // One claim: the summary moves with it.
    let queued = n.delivery(&notice.request.notice_id, "slack-0").await;
    let mut claim = queued.clone();
    claim.status = N::Sending;
    claim.claim_token = Some("t".into());
    claim.claimed_at = Some(n.now());
    let sending = n
        .store
        .transition(&queued, claim, NT::Claim, Effects::none())
        .await
        .unwrap()
        .unwrap();
    let p = n.store.progress(&notice.request.notice_id).await.unwrap();
    assert_eq!(counts(&p), [3, 1, 0, 2, 0], "after a claim");
    // (Undo the manual claim the way a retry would, so the worker can take it.)
    let mut back = sending.clone();
    back.status = N::Queued;
    back.claim_token = None;
    n.store
        .transition(&sending, back, NT::RetryableResult, Effects::none())
        .await
        .unwrap()
        .unwrap();

    n.drain().await;
    let p = n.store.progress(&notice.request.notice_id).await.unwrap();
    // email: ops sent, finance skipped (no address); slack: ops delivered, finance skipped.
    assert_eq!(counts(&p), [0, 0, 1, 3, 2], "after the worker");
    assert_eq!(p.total, 6);
    let stored: i64 = n
        .store
        .deliveries(&notice.request.notice_id)
        .await
        .unwrap()
        .iter()
        .filter(|d| d.status == N::Delivered)
        .count() as i64;
    assert_eq!(
        stored,
        p.count(N::Delivered),
        "the summary matches the deliveries"
    );
}

#[tokio::test]
async fn expires_queued_work_whose_deadline_passed_before_it_was_claimed() {
    let w = World::new().await;
    let n = &w.notify;
    let slack = Receiver::start().await;
    let mut late = ops_on_slack(&slack, "Flash sale");
    late.deadline = Some(n.now().plus(MINUTE));
    let late = n.create(late).await;
    n.clock.advance(2 * MINUTE);
    n.drain().await;
    assert_eq!(slack.count(), 0, "never sent");
    let d = n.delivery(&late.request.notice_id, "slack-0").await;
    assert_eq!(d.status, N::Expired);
    assert!(d.watch_at.is_none());
    assert!(n
        .item(&late.request.notice_id, &work_sk("slack-0"))
        .await
        .is_none());

    // A channel without an adapter: dispatch cannot find it, the queued delivery is skipped.
    let without_slack = n.worker_with(|adapters| adapters.without("slack"));
    let orphan = n.create(ops_on_slack(&slack, "Orphan")).await;
    let (work, count) = n.receive_work().await;
    assert_eq!(work.notice_id, orphan.request.notice_id);
    assert_eq!(
        without_slack.process(&work, count).await.unwrap(),
        WorkOutcome::Skipped {
            reason: "no adapter for channel slack".into()
        }
    );
    let d = n.delivery(&orphan.request.notice_id, "slack-0").await;
    assert_eq!(d.status, N::Skipped);
    assert!(
        d.history.iter().all(|h| h.kind != "claimed"),
        "never claimed"
    );
}

#[tokio::test]
async fn withdraws_a_notice_cancelling_its_queued_deliveries_and_keeps_idempotency() {
    let w = World::new().await;
    let n = &w.notify;
    let slack = Receiver::start().await;
    let mut new = new_notice(
        vec![
            contact("a", None, Some(slack.url("/h"))),
            contact("b", None, Some(slack.url("/h"))),
        ],
        &["slack", "console"],
        "Oops",
    );
    new.idempotency_key = "withdraw-me".into();
    let created = n.create(new.clone()).await;
    // The same key and request: the same notice, nothing new.
    let (again, was_created) = n.notices.create(&n.account, new.clone()).await.unwrap();
    assert!(!was_created);
    assert_eq!(again.request.notice_id, created.request.notice_id);
    // The same key, another request: refused.
    let mut different = new.clone();
    different.subject = "Other".into();
    assert!(n.notices.create(&n.account, different).await.is_err());

    let (withdrawn, cancelled) = n
        .notices
        .withdraw(&n.account, &created.request.notice_id)
        .await
        .unwrap();
    assert_eq!(withdrawn.status, NoticeStatus::Withdrawn);
    assert_eq!(cancelled, 2);
    n.drain().await;
    assert_eq!(slack.count(), 0);
    let p = n.store.progress(&created.request.notice_id).await.unwrap();
    assert_eq!(
        (
            p.count(N::Cancelled),
            p.count(N::Delivered),
            p.count(N::Queued)
        ),
        (2, 2, 0),
        "console messages were delivered at once; the queued ones are cancelled"
    );
    assert!(n
        .store
        .work_rows(&created.request.notice_id)
        .await
        .unwrap()
        .is_empty());
    // Withdrawing again changes nothing.
    let (_, again) = n
        .notices
        .withdraw(&n.account, &created.request.notice_id)
        .await
        .unwrap();
    assert_eq!(again, 0);
    // Another account does not see it.
    assert!(n
        .notices
        .withdraw(&id("someone-else"), &created.request.notice_id)
        .await
        .is_err());
}

// --------------------------------------------------------------------- provider confirmations

#[tokio::test]
async fn confirms_a_sent_email_once_per_provider_event_and_keeps_at_most_fifty_events() {
    let w = World::new().await;
    let n = &w.notify;
    let settings = install_settings();
    let to = unique_email("confirm");
    let notice = n
        .create(new_notice(
            vec![Recipient::Address(to)],
            &["email"],
            "Confirm me",
        ))
        .await;
    n.drain().await;
    let ses_id = n
        .delivery(&notice.request.notice_id, "email-0")
        .await
        .provider_ref
        .unwrap();

    let delivered = ses_notification("sns-delivery-1", "Delivery", &ses_id, "2", n.now());
    assert_eq!(
        confirm::intake_sns(&n.store, settings, &delivered, n.now())
            .await
            .unwrap(),
        IntakeOutcome::Applied(ConfirmOutcome::Delivered)
    );
    let d = n.delivery(&notice.request.notice_id, "email-0").await;
    assert_eq!(d.status, N::Delivered);
    assert_eq!(
        d.delivered_at,
        Timestamp::parse_rfc3339("2026-01-01T00:00:05Z")
    );
    // SNS delivers at least once: the same event again changes nothing.
    assert_eq!(
        confirm::intake_sns(&n.store, settings, &delivered, n.now())
            .await
            .unwrap(),
        IntakeOutcome::Applied(ConfirmOutcome::Duplicate)
    );
    let again = n.delivery(&notice.request.notice_id, "email-0").await;
    assert_eq!(again.version, d.version);

    // A bounce is recorded; the status stays (no lifecycle row writes `bounced`).
    let bounce = ses_notification("sns-bounce-1", "Bounce", &ses_id, "2", n.now());
    assert_eq!(
        confirm::intake_sns(&n.store, settings, &bounce, n.now())
            .await
            .unwrap(),
        IntakeOutcome::Applied(ConfirmOutcome::Recorded)
    );
    let d = n.delivery(&notice.request.notice_id, "email-0").await;
    assert_eq!(d.status, N::Delivered);
    assert_eq!(d.bounce.as_ref().unwrap().bounce_type, "Permanent");
    assert!(d.has_event("ses:sns-bounce-1"));

    // Sixty more events: the history keeps the newest fifty, each event once.
    for i in 0..60 {
        let open = ses_notification(&format!("sns-open-{i:02}"), "Open", &ses_id, "2", n.now());
        confirm::intake_sns(&n.store, settings, &open, n.now())
            .await
            .unwrap();
    }
    let d = n.delivery(&notice.request.notice_id, "email-0").await;
    assert_eq!(d.history.len(), MAX_HISTORY_EVENTS);
    assert!(d.has_event("ses:sns-open-59"));
    let ids: std::collections::HashSet<&str> = d.history.iter().map(|h| h.id.as_str()).collect();
    assert_eq!(ids.len(), MAX_HISTORY_EVENTS, "no duplicates");

    // The generic signed form (Standard Webhooks) for another provider: slack here.
    let unknown =
        confirm::intake_signed(&n.store, settings, "postmark", |_| None, b"{}", n.now()).await;
    assert!(matches!(unknown, Err(IntakeError::UnknownProvider(_))));
}

#[tokio::test]
async fn accepts_a_signed_sns_message_and_rejects_a_tampered_or_foreign_one() {
    let w = World::new().await;
    let n = &w.notify;
    let settings = install_settings();
    let to = unique_email("sns");
    let notice = n
        .create(new_notice(
            vec![Recipient::Address(to)],
            &["email"],
            "Signed",
        ))
        .await;
    n.drain().await;
    let ses_id = n
        .delivery(&notice.request.notice_id, "email-0")
        .await
        .provider_ref
        .unwrap();

    // Tampered: the signature no longer matches; nothing changes.
    let body = ses_notification("sns-t-1", "Delivery", &ses_id, "2", n.now());
    let mut m: sns::SnsMessage = serde_json::from_slice(&body).unwrap();
    m.message = m.message.replace("250 2.0.0 OK", "250 forged");
    let tampered = serde_json::to_vec(&m).unwrap();
    assert!(matches!(
        confirm::intake_sns(&n.store, settings, &tampered, n.now()).await,
        Err(IntakeError::Signature(SnsError::SignatureMismatch))
    ));
    // A certificate from anywhere but SNS is never fetched.
    let mut elsewhere: sns::SnsMessage = serde_json::from_slice(&body).unwrap();
    elsewhere.signing_cert_url = "https://evil.example/cert.pem".into();
    assert!(matches!(
        confirm::intake_sns(
            &n.store,
            settings,
            &serde_json::to_vec(&elsewhere).unwrap(),
            n.now()
        )
        .await,
        Err(IntakeError::Signature(SnsError::CertificateUrl(_)))
    ));
    // Validly signed, but from a topic this deployment does not subscribe to.
    let foreign = sns::local::notification(
        "arn:aws:sns:us-east-1:999999999999:someone-else",
        "sns-f-1",
        &json!({"eventType": "Delivery", "mail": {"messageId": ses_id}}).to_string(),
        "2",
        n.now(),
    );
    assert!(matches!(
        confirm::intake_sns(
            &n.store,
            settings,
            &serde_json::to_vec(&foreign).unwrap(),
            n.now()
        )
        .await,
        Err(IntakeError::ForeignTopic(_))
    ));
    assert_eq!(
        n.delivery(&notice.request.notice_id, "email-0")
            .await
            .status,
        N::Sent
    );

    // The topic signs with SignatureVersion 2: a genuine version 1 (SHA1) message is refused
    // and records nothing; version 2 is accepted.
    let v1 = ses_notification("sns-v1", "Open", &ses_id, "1", n.now());
    assert_eq!(
        confirm::intake_sns(&n.store, settings, &v1, n.now())
            .await
            .unwrap_err()
            .to_string(),
        IntakeError::Signature(SnsError::SignatureVersion("1".into())).to_string()
    );
    let ok = ses_notification("sns-v2", "Open", &ses_id, "2", n.now());
    assert_eq!(
        confirm::intake_sns(&n.store, settings, &ok, n.now())
            .await
            .unwrap(),
        IntakeOutcome::Applied(ConfirmOutcome::Recorded)
    );
    let ok = ses_notification("sns-ok", "Delivery", &ses_id, "2", n.now());
    assert_eq!(
        confirm::intake_sns(&n.store, settings, &ok, n.now())
            .await
            .unwrap(),
        IntakeOutcome::Applied(ConfirmOutcome::Delivered)
    );
    // A subscription confirmation is confirmed (through the injected HTTP, no network).
    let mut sub = sns::local::notification(
        TOPIC,
        "sns-sub",
        "You have chosen to subscribe",
        "2",
        n.now(),
    );
    sub.kind = "SubscriptionConfirmation".into();
    sub.token = Some("tok".into());
    sub.subscribe_url =
        Some("https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription&Token=tok".into());
    sub.unsubscribe_url = None;
    sns::local::sign(&mut sub, sns::local::TEST_KEY_PEM).unwrap();
    assert_eq!(
        confirm::intake_sns(
            &n.store,
            settings,
            &serde_json::to_vec(&sub).unwrap(),
            n.now()
        )
        .await
        .unwrap(),
        IntakeOutcome::SubscriptionConfirmed
    );
}

// -------------------------------------------------------------------------------- settling

#[tokio::test]
async fn settles_fifteen_minutes_of_ambiguity_as_failed_and_expires_queued_work_past_its_deadline()
{
    let w = World::new().await;
    let n = &w.notify;
    let slack = Receiver::start().await;
    let hook = || vec![contact("ops", None, Some(slack.url("/h")))];
    // One delivery claimed by a consumer that then vanished.
    let stuck = n.create(new_notice(hook(), &["slack"], "Stuck")).await;
    let queued = n.delivery(&stuck.request.notice_id, "slack-0").await;
    let mut claim = queued.clone();
    claim.status = N::Sending;
    claim.claim_token = Some("vanished".into());
    claim.claimed_at = Some(n.now());
    n.store
        .transition(&queued, claim, NT::Claim, Effects::none())
        .await
        .unwrap()
        .unwrap();
    // One queued delivery whose deadline is an hour away.
    let mut timed = new_notice(hook(), &["slack"], "Timed");
    timed.deadline = Some(n.now().plus(HOUR));
    let timed = n.create(timed).await;
    let settle = |now| settle_with(&n.store, &n.metrics, "test", now, SettleBudget::default());

    n.clock.advance(14 * MINUTE);
    let r = settle(n.now()).await.unwrap();
    assert_eq!((r.failed_ambiguous, r.expired), (0, 0), "not yet: {r:?}");
    assert_eq!(
        n.delivery(&stuck.request.notice_id, "slack-0").await.status,
        N::Sending
    );

    n.clock.advance(MINUTE);
    let r = settle(n.now()).await.unwrap();
    assert_eq!((r.failed_ambiguous, r.expired), (1, 0), "{r:?}");
    assert!(r.complete);
    let d = n.delivery(&stuck.request.notice_id, "slack-0").await;
    assert_eq!(d.status, N::Failed);
    assert_eq!(d.failure_reason, Some(FailureReason::Ambiguous));
    assert!(d.watch_at.is_none(), "settled deliveries leave the index");
    assert_eq!(n.metrics.failures()[0].reason, "ambiguous");

    n.clock.advance(HOUR);
    let r = settle(n.now()).await.unwrap();
    assert_eq!((r.failed_ambiguous, r.expired), (0, 1), "{r:?}");
    let d = n.delivery(&timed.request.notice_id, "slack-0").await;
    assert_eq!(d.status, N::Expired);
    assert!(n
        .item(&timed.request.notice_id, &work_sk("slack-0"))
        .await
        .is_none());
    // Nothing is settled twice.
    let r = settle(n.now()).await.unwrap();
    assert_eq!((r.failed_ambiguous, r.expired, r.examined), (0, 0, 0));
    assert_eq!(slack.count(), 0);
}

#[tokio::test]
async fn finishes_a_large_settling_backlog_across_invocations_without_redoing_or_skipping() {
    let w = World::new().await;
    let n = &w.notify;
    let recipients: Vec<Recipient> = (0..25)
        .map(|i| {
            contact(
                &format!("r{i}"),
                None,
                Some(format!("http://127.0.0.1:9/{i}")),
            )
        })
        .collect();
    let mut big = new_notice(recipients, &["slack"], "Backlog");
    big.deadline = Some(n.now().plus(MINUTE));
    let big = n.create(big).await;
    n.clock.advance(2 * MINUTE);
    let mut total = 0;
    let mut runs = 0;
    loop {
        runs += 1;
        let r = settle_with(
            &n.store,
            &n.metrics,
            "test",
            n.now(),
            SettleBudget::items(10),
        )
        .await
        .unwrap();
        assert!(r.expired <= 10);
        total += r.expired;
        if r.complete {
            break;
        }
        assert!(runs < 10, "settling does not converge");
    }
    assert_eq!(total, 25, "every delivery expired once");
    assert!(runs >= 3, "the budget split the work: {runs} runs");
    for d in n.store.deliveries(&big.request.notice_id).await.unwrap() {
        assert_eq!(d.status, N::Expired);
        assert_eq!(d.history.iter().filter(|h| h.kind == "expired").count(), 1);
    }
    let p = n.store.progress(&big.request.notice_id).await.unwrap();
    assert_eq!((p.count(N::Expired), p.total), (25, 25));
}

// ----------------------------------------------------------------------- the auto-pause notice

#[tokio::test]
async fn delivers_the_auto_pause_notice_the_delivery_worker_writes() {
    let w = World::new().await;
    let n = &w.notify;
    let admin = unique_email("admin");
    let request = subscription_paused_notice(
        &n.account,
        &id("sub_1"),
        std::slice::from_ref(&admin),
        50,
        n.now(),
    );
    // Written as the delivery worker writes it (a conditional put inside its pause transaction).
    w.pipeline
        .stack
        .clients
        .dynamo
        .put_item()
        .table_name(&w.pipeline.stack.config.notification_table)
        .set_item(Some(notice_item(&request).unwrap()))
        .condition_expression("attribute_not_exists(pk)")
        .send()
        .await
        .unwrap();
    n.pump().await;

    let notice = n.store.notice(&request.notice_id).await.unwrap().unwrap();
    assert_eq!(notice.status, NoticeStatus::Active);
    let email = n.delivery(&request.notice_id, "email-0").await;
    assert_eq!(email.status, N::Sent);
    let console = n.delivery(&request.notice_id, "console-0").await;
    assert_eq!(console.status, N::Delivered);
    assert_eq!(console.recipient, admin);
    let emails = captured_emails(&admin).await;
    assert_eq!(emails.len(), 1, "exactly one email");
    assert_eq!(emails[0]["subject"], "Subscription sub_1 was paused");
    assert_eq!(
        emails[0]["id"],
        email.provider_ref.as_deref().unwrap(),
        "the provider reference is SES's message id"
    );
    // The stream delivering the notice again creates nothing twice.
    let again = n.notices.fan_out(&request.notice_id).await.unwrap();
    assert_eq!(again.created, 0);
}

#[tokio::test]
async fn handles_the_sample_events_of_the_notify_function() {
    let w = World::new().await;
    let n = &w.notify;
    // The stream sample: a requested notice (no such notice here: nothing to fan out) and an
    // inserted work row, which is published.
    let stream_event: aws_lambda_events::event::dynamodb::Event =
        serde_json::from_str(&sample("notify-notice-stream.json")).unwrap();
    let response = n.stream.handle(stream_event).await;
    assert!(response.batch_item_failures.is_empty());
    let (work, _) = n.receive_work().await;
    assert_eq!(work.dispatch_id, "01JDX0SAMPLE0000000000DSP1");
    // The queue sample: work for a delivery that does not exist is dropped, not retried.
    let sqs_event: aws_lambda_events::event::sqs::SqsEvent =
        serde_json::from_str(&sample("notify-sqs.json")).unwrap();
    let response = n.worker.handle(sqs_event).await;
    assert!(response.batch_item_failures.is_empty());
}

#[tokio::test]
async fn reconciliation_reaches_settling_through_its_hook() {
    let w = World::new().await;
    let n = &w.notify;
    let mut timed = new_notice(
        vec![contact("ops", None, Some("http://127.0.0.1:9/h".into()))],
        &["slack"],
        "Hooked",
    );
    timed.deadline = Some(n.now().plus(MINUTE));
    let timed = n.create(timed).await;
    n.clock.advance(2 * MINUTE);
    let clock: Arc<dyn Clock> = Arc::new(n.clock.clone());
    let settler: Arc<dyn shared::reconcile::NotificationSettler> =
        Arc::new(shared::notify::settle::reconcile_settler(
            &w.pipeline.stack.clients,
            &w.pipeline.stack.config,
            &clock,
        ));
    let counts = settler
        .settle(std::time::Instant::now() + std::time::Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(counts["expired"], 1);
    assert_eq!(counts["more"], 0);
    assert_eq!(
        n.delivery(&timed.request.notice_id, "slack-0").await.status,
        N::Expired
    );
}

#[test]
fn the_queue_redrive_is_the_attempt_budget() {
    let template = local::template::Template::load_project().unwrap();
    let q = template
        .queues
        .iter()
        .find(|q| q.logical_id == "NotificationQueue")
        .unwrap();
    assert_eq!(
        q.redrive,
        Some(("NotificationDeadLetterQueue".to_string(), MAX_RECEIVES))
    );
    let t = template
        .tables
        .iter()
        .find(|t| t.logical_id == "NotificationTable")
        .unwrap();
    assert_eq!(t.stream_view.as_deref(), Some("NEW_AND_OLD_IMAGES"));
    assert!(t.global_indexes.iter().any(|i| i.name == WATCH_INDEX));
    assert!(t.global_indexes.iter().any(|i| i.name == INBOX_INDEX));
}

mod retention;

// ------------------------------------------------------------------------------ the HTTP API

mod api {
    use super::*;
    use axum::http::{Method, StatusCode};
    use local::testkit::api::{ApiAccount, OPERATOR_TOKEN};
    use shared::domain::signing::{SigningSecret, WebhookHeaders};

    #[tokio::test]
    async fn notices_api_creates_summarises_lists_and_withdraws_notices_idempotently() {
        let w = World::new().await;
        let n = &w.notify;
        let api = &w.api;
        let ApiAccount {
            account_id: account,
            token,
        } = api.account("Notices").await;
        // The Slack workspace of the webhook below is allowed for the account.
        api.allow_recipients(account.as_str(), json!({"slack_workspaces": ["T"]}))
            .await;
        let slack = Receiver::start().await;
        let request = json!({
            "recipients": ["user-1", {"id": "ops", "slack_webhook_url": slack.url("/services/T/B/x")}],
            "channels": ["slack", "console"],
            "subject": "Planned maintenance",
            "body": "Tonight 22:00–23:00 UTC.",
            "deadline": n.now().plus(HOUR).to_rfc3339(),
        });
        let created = api
            .post("/v1/notices", &token, request.clone())
            .header("idempotency-key", "maint-1")
            .await;
        let body = created.accepted().clone();
        let id = body["id"].as_str().unwrap().to_string();
        assert_eq!(
            created.header("location"),
            Some(&*format!("/v1/notices/{id}"))
        );
        assert_eq!(body["status"], "requested");
        assert_eq!(body["recipients"], json!(["user-1", "ops"]));
        assert!(
            !body.to_string().contains("/services/T/B/x"),
            "webhook URLs stay inside"
        );
        // The same request again: the same notice, 200.
        let again = api
            .post("/v1/notices", &token, request.clone())
            .header("idempotency-key", "maint-1")
            .await;
        assert_eq!(again.ok()["id"], id.as_str());
        // The same key with another request: 409.
        let mut other = request.clone();
        other["subject"] = json!("Something else");
        other["idempotency_key"] = json!("maint-1");
        api.post("/v1/notices", &token, other)
            .await
            .problem_of(StatusCode::CONFLICT, "conflict");
        // Every invalid field at once.
        let bad = api
            .post(
                "/v1/notices",
                &token,
                json!({"recipients": [], "channels": ["fax"], "subject": "", "body": "b",
                       "deadline": "tomorrow", "colour": "red"}),
            )
            .await;
        let fields: Vec<&str> = bad.problem_of(StatusCode::UNPROCESSABLE_ENTITY, "validation")
            ["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["field"].as_str().unwrap())
            .collect();
        for field in [
            "idempotency_key",
            "deadline",
            "recipients",
            "channels[0]",
            "subject",
            "colour",
        ] {
            assert!(fields.contains(&field), "{field} in {fields:?}");
        }

        // The pipeline fans it out; the summary counts by state.
        n.stream().await;
        let view = api.get(&format!("/v1/notices/{id}"), &token).await;
        let view = view.ok();
        assert_eq!(view["status"], "active");
        assert_eq!(view["progress"]["queued"], 2);
        assert_eq!(view["progress"]["delivered"], 2);
        assert_eq!(view["progress"]["bounced"], 0);
        assert_eq!(view["progress"]["total"], 4);
        // The console store lists the in-app notice for its recipient.
        let inbox = api
            .get("/v1/console/notices?recipient=user-1", &token)
            .await;
        let inbox = inbox.ok();
        assert_eq!(inbox["data"][0]["subject"], "Planned maintenance");
        assert_eq!(inbox["data"][0]["status"], "delivered");

        // Withdrawal cancels the queued deliveries (both Slack ones: one has no webhook).
        let w = api
            .post(&format!("/v1/notices/{id}/withdraw"), &token, json!({}))
            .await;
        let w = w.ok();
        assert_eq!(w["cancelled"], 2);
        assert_eq!(w["notice"]["status"], "withdrawn");
        assert_eq!(w["notice"]["progress"]["cancelled"], 2);
        n.drain().await;
        assert_eq!(slack.count(), 0);
        let list = api
            .get(&format!("/v1/notices/{id}/deliveries"), &token)
            .await;
        let statuses: Vec<&str> = list.ok()["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["status"].as_str().unwrap())
            .collect();
        assert_eq!(
            statuses,
            ["delivered", "delivered", "cancelled", "cancelled"]
        );

        // Another account sees nothing.
        let ApiAccount {
            token: stranger, ..
        } = api.account("Notices").await;
        api.get(&format!("/v1/notices/{id}"), &stranger)
            .await
            .problem_of(StatusCode::NOT_FOUND, "not-found");
        assert_ne!(account.as_str(), "");
    }

    #[tokio::test]
    async fn the_api_reads_provider_secrets_from_secrets_manager_once_at_start() {
        use local::testkit::api::ApiClient;
        let w = World::new().await;
        let n = &w.notify;
        let secrets_manager = aws_sdk_secretsmanager::Client::new(&w.pipeline.stack.sdk);
        let current = SigningSecret::from_bytes(&[21u8; 32]).unwrap();
        let env_only = SigningSecret::from_bytes(&[22u8; 32]).unwrap();
        let create = |name: String, value: String| {
            let client = secrets_manager.clone();
            async move {
                client
                    .create_secret()
                    .name(name)
                    .secret_string(value)
                    .send()
                    .await
                    .expect("the emulator creates the secret")
                    .arn
                    .expect("an ARN")
            }
        };
        let suffix = ulid::Ulid::new().to_string().to_ascii_lowercase();
        let arn = create(
            format!("rhythm-test/{suffix}/provider-event-secrets"),
            json!({"acme": current.expose_whsec()}).to_string(),
        )
        .await;
        let empty = create(format!("rhythm-test/{suffix}/empty"), "{}".into()).await;
        // The api function's start: the ARN is set, so the plain variable is not read.
        let load = |arn: String| {
            let client = secrets_manager.clone();
            let env_secret = format!("acme={}", env_only.expose_whsec());
            async move {
                confirm::ProviderEventSettings::load(
                    &client,
                    |name| match name {
                        confirm::SECRETS_ARN_VAR => Some(arn.clone()),
                        confirm::SECRETS_VAR => Some(env_secret.clone()),
                        confirm::TOPICS_VAR => Some(TOPIC.to_string()),
                        _ => None,
                    },
                    Arc::new(sns::local::test_http()),
                )
                .await
                .unwrap()
            }
        };
        let api = ApiClient::new(
            w.api_state()
                .with_provider_events(Arc::new(load(arn).await)),
        );
        let event = |secret: &SigningSecret, id: &str| {
            let body = json!({"provider_ref": "ref-unknown", "type": "delivered"}).to_string();
            let headers =
                WebhookHeaders::sign(std::slice::from_ref(secret), id, n.now(), body.as_bytes());
            let mut call = api
                .call(Method::POST, "/v1/provider-events/acme", None, None)
                .json_bytes(body.into_bytes());
            for (name, value) in headers.pairs() {
                call = call.header(name, value);
            }
            call
        };
        // Signed with the secret from Secrets Manager: accepted (and applied: no such reference).
        assert_eq!(
            event(&current, "evt-sm-1").await.ok()["outcome"],
            "unknown_reference"
        );
        // The plain variable's secret is not a key when the ARN is set.
        event(&env_only, "evt-sm-2")
            .await
            .problem_of(StatusCode::UNAUTHORIZED, "unauthorized");
        // `{}`: no provider at all.
        let none = ApiClient::new(
            w.api_state()
                .with_provider_events(Arc::new(load(empty).await)),
        );
        let body = json!({"provider_ref": "r", "type": "delivered"}).to_string();
        none.call(Method::POST, "/v1/provider-events/acme", None, None)
            .json_bytes(body.into_bytes())
            .await
            .problem_of(StatusCode::NOT_FOUND, "not-found");
        // An unreadable ARN fails the start, naming the secret.
        let missing =
            "arn:aws:secretsmanager:us-east-1:123456789012:secret:rhythm-test/none-AbCdEf";
        let e = confirm::ProviderEventSettings::load(
            &secrets_manager,
            |name| (name == confirm::SECRETS_ARN_VAR).then(|| missing.to_string()),
            Arc::new(sns::local::test_http()),
        )
        .await
        .err()
        .expect("a missing secret fails the start");
        assert!(e.contains(missing), "{e}");
    }

    #[tokio::test]
    async fn an_ses_event_about_a_delivery_not_recorded_yet_is_a_503_so_that_sns_retries_it() {
        let w = World::new().await;
        let n = &w.notify;
        install_settings();
        let post = |body: Vec<u8>| {
            w.api
                .call(Method::POST, "/v1/provider-events/ses", None, None)
                .json_bytes(body)
        };
        // SES can publish before the worker has saved the message id: no delivery has it yet.
        let early = ses_notification("sns-early-1", "Delivery", "ses-not-saved-yet", "2", n.now());
        let r = post(early.clone()).await;
        r.problem_of(StatusCode::SERVICE_UNAVAILABLE, "unavailable");
        assert_eq!(r.header("retry-after"), Some("5"));
        // Once the delivery is recorded, SNS's retry of the same kind of event is applied.
        let notice = n
            .create(new_notice(
                vec![Recipient::Address(unique_email("early"))],
                &["email"],
                "Early",
            ))
            .await;
        n.drain().await;
        let ses_id = n
            .delivery(&notice.request.notice_id, "email-0")
            .await
            .provider_ref
            .unwrap();
        let retried = ses_notification("sns-early-2", "Delivery", &ses_id, "2", n.now());
        assert_eq!(post(retried).await.ok()["outcome"], "delivered");
        assert_eq!(
            n.delivery(&notice.request.notice_id, "email-0")
                .await
                .status,
            N::Delivered
        );
        // The signed generic form keeps answering 200 `unknown_reference` (it is not SNS).
        let secret = SigningSecret::from_bytes(&[9u8; 32]).unwrap();
        let body = json!({"provider_ref": "nobody", "type": "delivered"}).to_string();
        let headers = WebhookHeaders::sign(&[secret], "evt-unknown-1", n.now(), body.as_bytes());
        let mut call = w
            .api
            .call(Method::POST, "/v1/provider-events/slack", None, None)
            .json_bytes(body.into_bytes());
        for (name, value) in headers.pairs() {
            call = call.header(name, value);
        }
        assert_eq!(call.await.ok()["outcome"], "unknown_reference");
    }

    /// The API counts what its alarms need apart from API Gateway's own figures: each refused
    /// credential (a bearer token, an SNS signature), and each deliberate 503 of the SES route,
    /// which the 5xx alarm subtracts; a 5xx that is a real failure on that same route is not
    /// counted as deliberate, and an accepted request counts toward nothing.
    #[tokio::test]
    async fn the_api_counts_refused_credentials_and_its_deliberate_503s_as_metrics() {
        use shared::web::metrics::{AUTHENTICATION_FAILURES, PROVIDER_EVENTS_DEFERRED};
        let w = World::new().await;
        let n = &w.notify;
        install_settings();
        let captured = shared::metrics::CapturedEmf::default();
        let api = local::testkit::api::ApiClient::new(
            w.api_state().with_metrics(Arc::new(captured.clone())),
        );
        let counted = |from: usize| -> Vec<(String, String)> {
            captured.documents()[from..]
                .iter()
                .flat_map(|d| {
                    let path = d["path"].as_str().unwrap_or_default().to_string();
                    d["_aws"]["CloudWatchMetrics"][0]["Metrics"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(move |m| (m["Name"].as_str().unwrap().to_string(), path.clone()))
                        .collect::<Vec<_>>()
                })
                .collect()
        };
        let ses = "/v1/provider-events/ses";
        let post = |body: Vec<u8>| api.call(Method::POST, ses, None, None).json_bytes(body);

        // Accepted: nothing counted.
        let ApiAccount { token, .. } = api.account("Metrics").await;
        api.get("/v1/whoami", &token).await.ok();
        assert_eq!(counted(0), []);

        // A refused bearer token and a forged SNS signature: authentication failures.
        api.get("/v1/whoami", "rk_not_a_token")
            .await
            .problem_of(StatusCode::UNAUTHORIZED, "unauthorized");
        let mut forged: Value = serde_json::from_slice(&ses_notification(
            "sns-forged-1",
            "Delivery",
            "ses-any",
            "2",
            n.now(),
        ))
        .unwrap();
        forged["Signature"] = json!("AAAA");
        post(forged.to_string().into_bytes())
            .await
            .problem_of(StatusCode::UNAUTHORIZED, "unauthorized");
        assert_eq!(
            counted(0),
            [
                (
                    AUTHENTICATION_FAILURES.to_string(),
                    "/v1/whoami".to_string()
                ),
                (AUTHENTICATION_FAILURES.to_string(), ses.to_string()),
            ]
        );
        let doc = &captured.documents()[0];
        assert_eq!(doc["Stage"], w.pipeline.stack.config.stage.as_str());
        assert_eq!(
            doc["_aws"]["CloudWatchMetrics"][0]["Namespace"],
            w.pipeline.stack.config.metrics_namespace.as_str()
        );
        assert_eq!(doc[AUTHENTICATION_FAILURES], 1);

        // An SES event before its delivery is recorded: the deliberate 503.
        let early = ses_notification("sns-metrics-1", "Delivery", "ses-not-saved", "2", n.now());
        post(early.clone())
            .await
            .problem_of(StatusCode::SERVICE_UNAVAILABLE, "unavailable");
        assert_eq!(
            counted(2),
            [(PROVIDER_EVENTS_DEFERRED.to_string(), ses.to_string())]
        );

        // The same event while the notification table fails: a 5xx that is no deferral.
        w.pipeline
            .stack
            .faults
            .inject("GetItem", local::faults::Fault::InternalError, 20);
        let r = post(ses_notification(
            "sns-metrics-2",
            "Delivery",
            "ses-not-saved",
            "2",
            n.now(),
        ))
        .await;
        assert!(r.status.is_server_error(), "{:?}", r.status);
        assert_eq!(counted(3), []);
    }

    #[tokio::test]
    async fn provider_event_routes_take_signed_sns_and_signed_webhooks_and_refuse_the_rest() {
        let w = World::new().await;
        let n = &w.notify;
        install_settings();
        let api = &w.api;
        let to = unique_email("route");
        let notice = n
            .create(new_notice(
                vec![Recipient::Address(to)],
                &["email"],
                "Routed",
            ))
            .await;
        n.drain().await;
        let ses_id = n
            .delivery(&notice.request.notice_id, "email-0")
            .await
            .provider_ref
            .unwrap();
        let post = |path: &'static str, body: Vec<u8>, headers: Vec<(&'static str, String)>| {
            let api = &api;
            async move {
                let call = api.call(Method::POST, path, None, None).json_bytes(body);
                headers
                    .iter()
                    .fold(call, |call, (name, value)| call.header(name, value))
                    .await
            }
        };

        let delivered = ses_notification("sns-route-1", "Delivery", &ses_id, "2", n.now());
        let r = post("/v1/provider-events/ses", delivered.clone(), vec![]).await;
        assert_eq!(r.ok()["outcome"], "delivered");
        let r = post("/v1/provider-events/ses", delivered, vec![]).await;
        assert_eq!(r.ok()["outcome"], "duplicate");
        assert_eq!(
            n.delivery(&notice.request.notice_id, "email-0")
                .await
                .status,
            N::Delivered
        );

        let mut forged: sns::SnsMessage = serde_json::from_slice(&ses_notification(
            "sns-route-2",
            "Bounce",
            &ses_id,
            "2",
            n.now(),
        ))
        .unwrap();
        forged.message = forged.message.replace("Permanent", "Transient");
        let r = post(
            "/v1/provider-events/ses",
            serde_json::to_vec(&forged).unwrap(),
            vec![],
        )
        .await;
        r.problem_of(StatusCode::UNAUTHORIZED, "unauthorized");
        assert!(n
            .delivery(&notice.request.notice_id, "email-0")
            .await
            .bounce
            .is_none());
        post("/v1/provider-events/ses", b"not json".to_vec(), vec![])
            .await
            .problem_of(StatusCode::BAD_REQUEST, "malformed-request");

        // The generic form, Standard Webhooks signed, for a Slack delivery.
        let slack = Receiver::start().await;
        let chat = n.create(ops_on_slack(&slack, "Chat")).await;
        n.drain().await;
        let slack_ref = n
            .delivery(&chat.request.notice_id, "slack-0")
            .await
            .provider_ref
            .unwrap();
        let body = json!({"provider_ref": slack_ref, "type": "complained", "detail": "muted"})
            .to_string()
            .into_bytes();
        let secret = SigningSecret::from_bytes(&[9u8; 32]).unwrap();
        let signed = WebhookHeaders::sign(&[secret], "evt-1", n.now(), &body);
        let headers: Vec<(&'static str, String)> = signed
            .pairs()
            .iter()
            .map(|(k, v)| (*k, v.to_string()))
            .collect();
        let r = post("/v1/provider-events/slack", body.clone(), headers.clone()).await;
        assert_eq!(r.ok()["outcome"], "recorded");
        let r = post("/v1/provider-events/slack", body.clone(), headers.clone()).await;
        assert_eq!(r.ok()["outcome"], "duplicate");
        assert!(n
            .delivery(&chat.request.notice_id, "slack-0")
            .await
            .has_event("slack:evt-1"));
        let wrong = SigningSecret::from_bytes(&[1u8; 32]).unwrap();
        let bad = WebhookHeaders::sign(&[wrong], "evt-2", n.now(), &body);
        let bad_headers: Vec<(&'static str, String)> = bad
            .pairs()
            .iter()
            .map(|(k, v)| (*k, v.to_string()))
            .collect();
        post("/v1/provider-events/slack", body.clone(), bad_headers)
            .await
            .problem_of(StatusCode::UNAUTHORIZED, "unauthorized");
        post("/v1/provider-events/pigeon", body, headers)
            .await
            .problem_of(StatusCode::NOT_FOUND, "not-found");
    }

    #[tokio::test]
    async fn operator_requeue_route_requeues_exhausted_work_and_refuses_ambiguous_failures() {
        let w = World::new().await;
        let n = &w.notify;
        let api = &w.api;
        let slack = Receiver::start().await;
        let (notice, _) = exhaust(n, &slack, "Operator").await;
        let path = format!(
            "/operator/notifications/{}/deliveries/slack-0/requeue",
            notice.request.notice_id
        );
        api.post(&path, OPERATOR_TOKEN, json!({}))
            .await
            .problem_of(StatusCode::UNPROCESSABLE_ENTITY, "validation");
        let r = api
            .post(
                &path,
                OPERATOR_TOKEN,
                json!({"reason": "Slack outage is over"}),
            )
            .await;
        let body = r.ok();
        assert_eq!(body["delivery"]["status"], "queued");
        assert!(body["dispatch_id"].is_string());
        let view = api
            .get(
                &format!("/operator/notifications/{}", notice.request.notice_id),
                OPERATOR_TOKEN,
            )
            .await;
        let view = view.ok();
        assert_eq!(view["notice"]["progress"]["queued"], 1);
        assert_eq!(
            view["deliveries"][0]["history"]
                .as_array()
                .unwrap()
                .last()
                .unwrap()["kind"],
            "requeued"
        );

        // Ambiguous: refused with the reason, nothing changes.
        let stuck = n.create(ops_on_slack(&slack, "Stuck")).await;
        let queued = n.delivery(&stuck.request.notice_id, "slack-0").await;
        let mut claim = queued.clone();
        claim.status = N::Sending;
        claim.claimed_at = Some(n.now());
        n.store
            .transition(&queued, claim, NT::Claim, Effects::none())
            .await
            .unwrap()
            .unwrap();
        n.clock.advance(AMBIGUITY_TIMEOUT);
        settle_with(
            &n.store,
            &n.metrics,
            "test",
            n.now(),
            SettleBudget::default(),
        )
        .await
        .unwrap();
        let r = api
            .post(
                &format!(
                    "/operator/notifications/{}/deliveries/slack-0/requeue",
                    stuck.request.notice_id
                ),
                OPERATOR_TOKEN,
                json!({"reason": "try again"}),
            )
            .await;
        let problem = r.problem_of(StatusCode::CONFLICT, "conflict");
        assert_eq!(
            problem["detail"],
            "an ambiguous failure does not qualify for requeue: the provider may already have sent it"
        );
        assert_eq!(
            n.delivery(&stuck.request.notice_id, "slack-0").await.status,
            N::Failed
        );
        api.post(
            &format!(
                "/operator/notifications/{}/deliveries/slack-9/requeue",
                stuck.request.notice_id
            ),
            OPERATOR_TOKEN,
            json!({"reason": "x"}),
        )
        .await
        .problem_of(StatusCode::NOT_FOUND, "not-found");
    }

    #[tokio::test]
    async fn a_notices_slack_url_is_checked_at_the_api_https_on_hooks_slack_com() {
        let w = World::new().await;
        let ApiAccount {
            account_id, token, ..
        } = w.api.account("Slack URLs").await;
        // The workspace of the good URLs is allowed for the account.
        w.api
            .allow_recipients(account_id.as_str(), json!({"slack_workspaces": ["T"]}))
            .await;
        let production = w.production_api();
        let notice = |url: &str| {
            json!({
                "recipients": ["user-1", {"id": "ops", "slack_webhook_url": url}],
                "channels": ["slack"],
                "subject": "Planned maintenance",
                "body": "Tonight.",
            })
        };
        for (i, bad) in [
            "http://hooks.slack.com/services/T/B/x",
            "https://example.com/services/T/B/x",
            "https://hooks.slack.com.evil.example/services/T/B/x",
            "https://127.0.0.1/services/T/B/x",
            "https://[::ffff:0:a9fe:a9fe]/x",
            "not a url",
        ]
        .into_iter()
        .enumerate()
        {
            let r = production
                .post("/v1/notices", &token, notice(bad))
                .header("idempotency-key", &format!("bad-{i}"))
                .await;
            r.problem_of(StatusCode::UNPROCESSABLE_ENTITY, "validation");
            assert_eq!(r.fields(), ["recipients[1].slack_webhook_url"], "{bad}");
        }
        production
            .post(
                "/v1/notices",
                &token,
                notice("https://hooks.slack.com/services/T/B/x"),
            )
            .header("idempotency-key", "good")
            .await
            .accepted();
        // Where private targets are allowed (the local demo, these tests), a loopback receiver
        // is a Slack webhook, over http too; the metadata address never is.
        let slack = Receiver::start().await;
        w.api
            .post("/v1/notices", &token, notice(&slack.url("/services/T/B/x")))
            .header("idempotency-key", "loopback")
            .await
            .accepted();
        let r = w
            .api
            .post(
                "/v1/notices",
                &token,
                notice("http://169.254.169.254/latest"),
            )
            .header("idempotency-key", "metadata")
            .await;
        assert_eq!(r.fields(), ["recipients[1].slack_webhook_url"]);
    }
}
