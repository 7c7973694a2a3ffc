//! Publishing push work: up to ten messages to the delivery queue in one request, each visible
//! after its delay. The stream path's message carries up to [`PACKED`] of one account's new
//! deliveries ([`pack`]); the sweep's, and the copies the worker defers or hands back, carry one
//! delivery's work each ([`publish`]). Nothing is written to the table when a delivery is
//! published.

use crate::domain::time::Timestamp;
use crate::store::delivery::DeliveryWork;
use crate::store::StoreError;
use aws_sdk_sqs::types::SendMessageBatchRequestEntry;
use std::time::Duration;

/// SQS's longest message delay.
pub(crate) const MAX_SQS_DELAY: Duration = Duration::from_secs(900);

/// Sends up to ten deliveries' work to the delivery queue in one request, one delivery to a
/// message (the sweep's retries, the worker's deferred copies), each visible after its delay.
/// Returns the indexes that were not accepted.
///
/// Every message carries its account as `MessageGroupId`: on a standard queue that makes it an
/// SQS fair queue, where a backlog of one group (a noisy account) does not raise the dwell time
/// of the others' messages (docs/scale.md, "Fairness between tenants"). Ordering and
/// exactly-once stay a FIFO queue's; a standard queue keeps its throughput and delays.
pub async fn publish(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    entries: &[(DeliveryWork, Duration)],
) -> Vec<usize> {
    let messages: Vec<Outgoing> = entries
        .iter()
        .map(|(work, delay)| Outgoing {
            body: serde_json::to_string(work).unwrap_or_default(),
            group: Some(work.account_id.to_string()),
            delay: *delay,
        })
        .collect();
    publish_messages(sqs, queue_url, &messages).await
}

/// New deliveries of one account per queue message, at most: the stream path puts up to this
/// many of an account's new deliveries in one message (a JSON array of their work), so the queue's
/// requests per delivery (the send, the mapping's receive and delete) are divided by up to this.
/// Each delivery in it is claimed, attempted, handed back and deferred on its own by the worker
/// ([`crate::delivery::worker`]), as a message of its own would be.
pub const PACKED: usize = 10;

/// The messages that carry `works`: each account's (in the order its first work comes) in
/// messages of up to [`PACKED`], with the indexes into `works` each carries. A message of one
/// work is that work's object, as every other path sends it; of more, an array of them.
pub fn pack(works: &[DeliveryWork]) -> Vec<(Outgoing, Vec<usize>)> {
    let delayed: Vec<(DeliveryWork, Duration)> =
        works.iter().map(|w| (w.clone(), Duration::ZERO)).collect();
    pack_delayed(&delayed)
}

/// As [`pack`], each work with its delay: the works of one account with the same delay share
/// messages (the worker's copies of deliveries waiting for rate-limit slots in the same second).
pub fn pack_delayed(works: &[(DeliveryWork, Duration)]) -> Vec<(Outgoing, Vec<usize>)> {
    let mut groups: Vec<((&crate::ids::AccountId, Duration), Vec<usize>)> = Vec::new();
    for (i, (w, delay)) in works.iter().enumerate() {
        let group = (&w.account_id, *delay);
        match groups.iter_mut().find(|(g, _)| *g == group) {
            Some((_, indexes)) => indexes.push(i),
            None => groups.push((group, vec![i])),
        }
    }
    groups
        .into_iter()
        .flat_map(|((account, delay), indexes)| {
            indexes
                .chunks(PACKED)
                .map(|chunk| {
                    let body = match chunk {
                        [one] => serde_json::to_string(&works[*one].0),
                        many => serde_json::to_string(
                            &many.iter().map(|&i| &works[i].0).collect::<Vec<_>>(),
                        ),
                    };
                    let message = Outgoing {
                        body: body.unwrap_or_default(),
                        group: Some(account.to_string()),
                        delay,
                    };
                    (message, chunk.to_vec())
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The deliveries a queue message asks for: one work's object or an array of them ([`pack`]);
/// `None` for anything else (a test event's message, or a malformed one).
pub fn works_in(body: &str) -> Option<Vec<DeliveryWork>> {
    if body.trim_start().starts_with('[') {
        let works: Vec<DeliveryWork> = serde_json::from_str(body).ok()?;
        return (!works.is_empty()).then_some(works);
    }
    serde_json::from_str(body).ok().map(|w| vec![w])
}

/// A message for the delivery queue as it is sent: its body, its fair-queue group (its
/// account) and its delay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    pub body: String,
    pub group: Option<String>,
    pub delay: Duration,
}

/// Sends up to ten messages to the queue in one request, as they are: packed work ([`pack`]),
/// test events, and the copies the worker hands back (a delivery's work alone, or a message that
/// is not delivery work as it came); [`publish`] for one delivery's work to a message. Returns the
/// indexes that were not accepted.
pub(crate) async fn publish_messages(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    messages: &[Outgoing],
) -> Vec<usize> {
    if messages.is_empty() {
        return Vec::new();
    }
    let batch: Vec<SendMessageBatchRequestEntry> = messages
        .iter()
        .enumerate()
        .filter_map(|(i, m)| {
            SendMessageBatchRequestEntry::builder()
                .id(i.to_string())
                .message_body(&m.body)
                .delay_seconds(m.delay.as_secs() as i32)
                .set_message_group_id(m.group.clone())
                .build()
                .ok()
        })
        .collect();
    match sqs
        .send_message_batch()
        .queue_url(queue_url)
        .set_entries(Some(batch))
        .send()
        .await
    {
        Ok(out) => out
            .failed
            .iter()
            .filter_map(|f| f.id.parse().ok())
            .collect(),
        Err(e) => {
            tracing::warn!(error = %StoreError::dynamo(e), "SendMessageBatch failed");
            (0..messages.len()).collect()
        }
    }
}

/// The SQS delay that makes a message visible at `due_at`: whole seconds rounded up (never early),
/// at most SQS's fifteen minutes.
pub fn delay_until(due_at: Timestamp, now: Timestamp) -> Duration {
    let ms = due_at.since(now).as_millis() as u64;
    Duration::from_secs(ms.div_ceil(1000)).min(MAX_SQS_DELAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn work(account: &str, n: usize) -> DeliveryWork {
        DeliveryWork {
            account_id: account.parse().unwrap(),
            change_id: ulid::Ulid::from_parts(1, n as u128)
                .to_string()
                .parse()
                .unwrap(),
            subscription_id: format!("sub{n}").parse().unwrap(),
        }
    }

    #[test]
    fn new_work_is_packed_by_account_at_most_ten_to_a_message_and_read_back_whole() {
        let mut works: Vec<DeliveryWork> = (0..23).map(|n| work("acct-a", n)).collect();
        works.insert(5, work("acct-b", 100));
        let packed = pack(&works);
        let sizes: Vec<(String, usize)> = packed
            .iter()
            .map(|(m, i)| (m.group.clone().unwrap(), i.len()))
            .collect();
        assert_eq!(
            sizes,
            [
                ("acct-a".to_string(), 10),
                ("acct-a".to_string(), 10),
                ("acct-a".to_string(), 3),
                ("acct-b".to_string(), 1)
            ]
        );
        for (message, indexes) in &packed {
            let read = works_in(&message.body).expect("a message of delivery work");
            let sent: Vec<DeliveryWork> = indexes.iter().map(|&i| works[i].clone()).collect();
            assert_eq!(read, sent);
            assert_eq!(message.delay, Duration::ZERO);
        }
        // A message of one work is that work's object, as the other paths send it.
        let (single, _) = &packed[3];
        assert_eq!(
            serde_json::from_str::<DeliveryWork>(&single.body).unwrap(),
            works[5]
        );
        let all: Vec<usize> = packed.iter().flat_map(|(_, i)| i.clone()).collect();
        assert_eq!(all.len(), works.len(), "every work in exactly one message");
    }

    #[test]
    fn delayed_work_is_packed_by_account_and_delay() {
        let (one, two) = (Duration::from_secs(1), Duration::from_secs(2));
        let works = vec![
            (work("acct-a", 0), one),
            (work("acct-a", 1), two),
            (work("acct-a", 2), one),
            (work("acct-b", 3), one),
        ];
        let packed: Vec<(Duration, Vec<usize>)> = pack_delayed(&works)
            .into_iter()
            .map(|(m, i)| (m.delay, i))
            .collect();
        assert_eq!(packed, [(one, vec![0, 2]), (two, vec![1]), (one, vec![3])]);
    }

    #[test]
    fn a_message_that_is_not_delivery_work_has_none() {
        assert_eq!(works_in("[]"), None);
        assert_eq!(works_in(r#"{"test_event":{}}"#), None);
        assert_eq!(works_in("not json"), None);
        assert_eq!(works_in(r#"[{"account_id":"a"}]"#), None);
    }

    #[test]
    fn delays_round_up_and_stop_at_fifteen_minutes() {
        let now = Timestamp(10_000);
        assert_eq!(delay_until(Timestamp(10_000), now), Duration::ZERO);
        assert_eq!(delay_until(Timestamp(5_000), now), Duration::ZERO);
        assert_eq!(delay_until(Timestamp(10_001), now), Duration::from_secs(1));
        assert_eq!(delay_until(Timestamp(70_000), now), Duration::from_secs(60));
        assert_eq!(
            delay_until(Timestamp(10_000 + 3_600_000), now),
            MAX_SQS_DELAY
        );
    }
}
