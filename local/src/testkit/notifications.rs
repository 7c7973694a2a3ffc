//! The notification pipeline of the test world, wired as the template wires the `notify`
//! function: the notification table's stream into the fan-out, the notification queue (with its
//! dead-letter queue) into the channel worker. It shares the world's stack and manual clock.

use crate::queues::{QueueReport, QueueTap};
use crate::streams::StreamTap;
use crate::test_stack::TestStack;
use aws_config::SdkConfig;
use aws_sdk_sqs::types::MessageSystemAttributeName;
use shared::aws::Clients;
use shared::clock::{Clock, ManualClock};
use shared::config::Config;
use shared::domain::retry::SeededJitter;
use shared::domain::time::Timestamp;
use shared::ids::{AccountId, NoticeId};
use shared::notify::channels::Adapters;
use shared::notify::metrics::CapturedMetrics;
use shared::notify::notice_service::{NewNotice, NoticeService};
use shared::notify::stream::NotificationStream;
use shared::notify::table::NotificationTable;
use shared::notify::worker::NotificationWorker;
use shared::store::notice::{self, notice_pk, NoticeRecord};
use shared::store::notification_delivery::NotificationDelivery;
use shared::store::notification_work::NotificationWork;
use shared::store::Item;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::Mutex;

pub struct Notifications {
    pub clock: ManualClock,
    /// The channel worker (Slack and email through the emulator's SES, console in the table),
    /// with seeded jitter and captured metrics.
    pub worker: NotificationWorker,
    pub stream: NotificationStream,
    pub notices: NoticeService,
    pub store: NotificationTable,
    pub metrics: CapturedMetrics,
    /// The account the notices of a test belong to.
    pub account: AccountId,
    clients: Clients,
    config: Config,
    sdk: SdkConfig,
    queue_url: String,
    queue_arn: String,
    tap: Mutex<StreamTap>,
}

impl Notifications {
    pub async fn new(t: &TestStack, clock: &ManualClock) -> Self {
        let shared_clock: Arc<dyn Clock> = Arc::new(clock.clone());
        let metrics = CapturedMetrics::default();
        let worker = NotificationWorker::with_adapters(
            t.clients.clone(),
            t.config.clone(),
            shared_clock.clone(),
            Adapters::standard(&t.clients, &t.config),
        )
        .with_jitter(SeededJitter::new(7))
        .with_metrics(Arc::new(metrics.clone()));
        let stream =
            NotificationStream::new(t.clients.clone(), t.config.clone(), shared_clock.clone());
        let store = NotificationTable::from_config(&t.clients, &t.config);
        let notices = NoticeService::new(store.clone(), shared_clock);
        // The emulator refuses mail from an unverified sender, as SES does.
        let _ = t
            .clients
            .ses
            .create_email_identity()
            .email_identity(&t.config.notification_sender)
            .send()
            .await;
        let queue = t.stack.queue("NotificationQueue");
        Notifications {
            clock: clock.clone(),
            worker,
            stream,
            notices,
            store,
            metrics,
            account: AccountId::from_stored(format!("acct{}", t.stack.prefix)),
            clients: t.clients.clone(),
            config: t.config.clone(),
            sdk: t.sdk.clone(),
            queue_url: queue.url.clone(),
            queue_arn: queue.arn.clone(),
            tap: Mutex::new(t.stream("NotificationTable")),
        }
    }

    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// A tap on the notification queue.
    pub fn queue(&self) -> QueueTap {
        QueueTap::new(&self.sdk, &self.queue_url, &self.queue_arn)
    }

    /// A notification worker with other adapters, on the same tables and clock.
    pub fn worker_with(&self, adapters: impl FnOnce(Adapters) -> Adapters) -> NotificationWorker {
        NotificationWorker::with_adapters(
            self.clients.clone(),
            self.config.clone(),
            Arc::new(self.clock.clone()),
            adapters(Adapters::standard(&self.clients, &self.config)),
        )
    }

    /// Drains the notification table's stream (fan-out, publishing work) until it is quiet: a
    /// fan-out's own writes (work rows) are records of the next drain.
    pub async fn stream(&self) -> usize {
        let mut tap = self.tap.lock().await;
        let mut records = 0;
        for _ in 0..10 {
            let report = tap.drain(|e| self.stream.handle(e)).await.unwrap();
            assert_eq!(report.failures, 0, "stream failures");
            if report.records == 0 {
                break;
            }
            records += report.records;
        }
        records
    }

    /// Drains the notification queue into the worker.
    pub async fn drain(&self) -> QueueReport {
        self.queue()
            .drain(|e| self.worker.handle(e), 100)
            .await
            .unwrap()
    }

    /// Stream, then queue, until nothing moves.
    pub async fn pump(&self) {
        for _ in 0..10 {
            let records = self.stream().await;
            let queue = self.drain().await;
            if records == 0 && queue.messages == 0 {
                return;
            }
        }
    }

    /// Creates a notice of the test's account and fans it out (the stream), without draining
    /// the queue.
    pub async fn create(&self, new: NewNotice) -> NoticeRecord {
        let (n, created) = self.notices.create(&self.account, new).await.unwrap();
        assert!(created);
        self.stream().await;
        self.store
            .notice(&n.request.notice_id)
            .await
            .unwrap()
            .unwrap()
    }

    pub async fn delivery(&self, notice_id: &NoticeId, key: &str) -> NotificationDelivery {
        self.store
            .delivery(notice_id, key)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("no delivery {notice_id}/{key}"))
    }

    pub async fn item(&self, notice_id: &NoticeId, sk: &str) -> Option<Item> {
        self.store.get(&notice_pk(notice_id), sk).await.unwrap()
    }

    /// Every item of a notice's partition, by sort key.
    pub async fn partition(&self, notice_id: &NoticeId) -> HashMap<String, Item> {
        notice::partition(
            &self.store.dynamo,
            &self.store.table,
            notice_id,
            "",
            None,
            None,
        )
        .await
        .unwrap()
        .into_iter()
        .map(|i| (i["sk"].as_s().unwrap().clone(), i))
        .collect()
    }

    /// The one message on the queue, received (it stays in flight for its visibility timeout),
    /// with its receive count.
    pub async fn receive_work(&self) -> (NotificationWork, u32) {
        let messages = self.queue().receive().await.unwrap();
        assert_eq!(messages.len(), 1, "one message");
        let m = &messages[0];
        let count = m
            .attributes
            .as_ref()
            .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
            .and_then(|v| v.parse().ok())
            .unwrap_or(1);
        (
            serde_json::from_str(m.body.as_deref().unwrap()).unwrap(),
            count,
        )
    }
}
