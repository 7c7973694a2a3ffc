//! The batch: what one invocation does with the queue messages it was handed.
//!
//! A message carries one delivery's work or up to
//! [`PACKED`](crate::delivery::dispatch::publish::PACKED) of one account's (the dispatcher's
//! [`pack`](crate::delivery::dispatch::publish::pack)); every delivery in it is an item of the
//! batch, claimed, attempted, deferred and handed back on its own, as a message of its own would
//! be. A message that is not delivery work (a test event's, or a malformed one) is one item,
//! handled as a whole.
//!
//! Items start in the batch's order as slots free up, at most [`BATCH_CONCURRENCY`] at once and
//! [`PER_SUBSCRIPTION_CONCURRENCY`] of one subscription (so one hanging endpoint cannot hold every
//! slot); an item whose subscription's slots are full keeps its place while later ones of other
//! subscriptions go ahead. An item starts only if its attempt could finish before the
//! invocation's deadline (the webhook timeout and [`DEADLINE_MARGIN`] from the moment its turn
//! comes); otherwise it is handed back, unread and unclaimed, so no attempt number is spent on it
//! and the invocation ends before its timeout. Once an attempt to a subscription's endpoint has
//! run long ([`ran_long`](super::ran_long): the whole webhook timeout, or most of it), the items
//! of that subscription not yet started are deferred ([`ENDPOINT_DEFERRAL`]): a hanging endpoint
//! costs a batch one timeout, not one per [`PER_SUBSCRIPTION_CONCURRENCY`] of its deliveries. A
//! delivery of a rate-limited integration whose slot is in a later second ([`super::rate_limit`])
//! waits for it alone: it held its batch slot for the claim, the reservation and one write.
//!
//! A deferred or handed-back item is sent again as a copy of its own (a delivery's work as a
//! message of its own, whatever message it came in), with a delay ([`ENDPOINT_DEFERRAL`], the
//! rate limit's, or [`HAND_BACK_DELAY`]), and acknowledged: a new message starts its receives at
//! none, so running out of time never counts toward the dead-letter queue. The copies of
//! deliveries waiting for rate-limit slots are packed, an account's waiting as long sharing
//! messages ([`pack_delayed`]): a backlog's copies cost a fraction of a message each. A message fails (and
//! the queue returns it, every delivery in it) only when one of its items does: malformed,
//! storage unreachable, or a copy that could not be sent. Its other items, done or copied, are
//! then repeated by the returned message, and their claims refuse them.
//!
//! [`Schedule`] (who starts, what is deferred) and [`tally`] (which messages fail) decide without
//! I/O; the async code here runs the items and sends the copies.

use super::dead_runs::BatchRuns;
use super::{
    DeliveryWorker, WorkOutcome, WorkerError, BATCH_CONCURRENCY, DEADLINE_MARGIN,
    ENDPOINT_DEFERRAL, HAND_BACK_DELAY, PER_SUBSCRIPTION_CONCURRENCY,
};
use crate::delivery::dispatch::pack_delayed;
use crate::delivery::dispatch::publish::{publish_messages, works_in, Outgoing};
use crate::store::delivery::DeliveryWork;
use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsMessage};
use futures::StreamExt;
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// One delivery of a batch, or a message that is not delivery work.
pub(super) struct Item {
    /// The message (index into the batch's records) it came in.
    record: usize,
    /// The delivery's work; `None`: the message is handled as a whole (a test event, or
    /// malformed).
    work: Option<DeliveryWork>,
}

/// What became of one item of a batch.
#[derive(Debug)]
pub(super) enum Handled {
    Done(Result<WorkOutcome, WorkerError>),
    /// Not started: its attempt could not have finished before the invocation's deadline.
    HandedBack,
    /// Not started: an attempt to its endpoint ran long earlier in the batch, or its
    /// integration's rate-limit schedule could not be written; a copy delayed this long is put on
    /// the queue (handed back instead, should that send fail).
    Deferred(Duration),
    /// Not started: it waits for its rate-limit slot; a copy delayed this long is put on the
    /// queue, packed with its account's others waiting as long.
    AwaitsSlot(Duration),
}

/// The batch's items, in the order of the messages and of the deliveries within each.
fn items_of(records: &[SqsMessage]) -> Vec<Item> {
    records
        .iter()
        .enumerate()
        .flat_map(
            |(record, m)| match works_in(m.body.as_deref().unwrap_or_default()) {
                Some(works) => works
                    .into_iter()
                    .map(|w| Item {
                        record,
                        work: Some(w),
                    })
                    .collect(),
                None => vec![Item { record, work: None }],
            },
        )
        .collect()
}

/// Whether an attempt whose turn comes at `now` may start: its `budget` (the webhook timeout and
/// [`DEADLINE_MARGIN`]) fits before the invocation's `deadline`, when there is one.
pub(super) fn starts_in_time(deadline: Option<Instant>, now: Instant, budget: Duration) -> bool {
    deadline.is_none_or(|d| now + budget <= d)
}

/// The batch's slots: which item starts next, and what becomes of the items not yet started when
/// one finishes. Items are indexes into the batch; each is started at most once and ends with
/// exactly one [`Handled`].
pub(super) struct Schedule {
    /// Each item's subscription; `None` (a message handled as a whole) takes no subscription's
    /// slot.
    subscriptions: Vec<Option<String>>,
    /// The items not yet started, in the batch's order.
    waiting: VecDeque<usize>,
    /// Items started and not finished, per subscription.
    running: HashMap<String, usize>,
    /// Items started and not finished.
    in_flight: usize,
    /// What became of each item (`None`: not yet decided).
    fates: Vec<Option<Handled>>,
    /// Whether an endpoint whose attempt ran long has its waiting items deferred.
    endpoint_bound: bool,
}

impl Schedule {
    pub(super) fn new(subscriptions: Vec<Option<String>>, endpoint_bound: bool) -> Self {
        Schedule {
            waiting: (0..subscriptions.len()).collect(),
            fates: subscriptions.iter().map(|_| None).collect(),
            subscriptions,
            running: HashMap::new(),
            in_flight: 0,
            endpoint_bound,
        }
    }

    /// The item to start now, if a slot is free for one: the first waiting item whose
    /// subscription has fewer than [`PER_SUBSCRIPTION_CONCURRENCY`] running, while fewer than
    /// [`BATCH_CONCURRENCY`] run. It is counted running until [`Self::finished`].
    pub(super) fn start_next(&mut self) -> Option<usize> {
        if self.in_flight >= BATCH_CONCURRENCY {
            return None;
        }
        let running = &self.running;
        let free = |s: &Option<String>| {
            s.as_deref()
                .is_none_or(|s| running.get(s).copied().unwrap_or(0) < PER_SUBSCRIPTION_CONCURRENCY)
        };
        let next = (self.waiting.iter()).position(|&i| free(&self.subscriptions[i]))?;
        let i = self.waiting.remove(next)?;
        if let Some(s) = &self.subscriptions[i] {
            *self.running.entry(s.clone()).or_default() += 1;
        }
        self.in_flight += 1;
        Some(i)
    }

    /// Item `i` has finished as `handled`; `ran_long`: its attempt ran long, so (with the endpoint
    /// bound) its subscription's waiting items are deferred by [`ENDPOINT_DEFERRAL`]. An item over
    /// its rate limit is deferred by the limit's delay, a second more when `coin` says so.
    pub(super) fn finished(
        &mut self,
        i: usize,
        handled: Handled,
        ran_long: bool,
        coin: impl FnOnce() -> bool,
    ) {
        self.in_flight -= 1;
        if let Some(s) = self.subscriptions[i].as_deref() {
            if let Some(n) = self.running.get_mut(s) {
                *n -= 1;
            }
            if ran_long && self.endpoint_bound {
                let (subscriptions, fates) = (&self.subscriptions, &mut self.fates);
                self.waiting.retain(|&j| {
                    let same = subscriptions[j].as_deref() == Some(s);
                    if same {
                        fates[j] = Some(Handled::Deferred(ENDPOINT_DEFERRAL));
                    }
                    !same
                });
            }
        }
        self.fates[i] = Some(match handled {
            Handled::Done(Ok(WorkOutcome::OverRateLimit)) => {
                Handled::Deferred(crate::domain::rate_limit::deferral(coin()))
            }
            Handled::Done(Ok(WorkOutcome::WaitsForRateSlot(wait))) => Handled::AwaitsSlot(wait),
            other => other,
        });
    }

    /// What became of each item; `None` only for one never started nor deferred.
    pub(super) fn into_fates(self) -> Vec<Option<Handled>> {
        self.fates
    }
}

/// The items to put back on the queue as delayed copies, with their delays.
fn deferred(fates: &[Option<Handled>]) -> Vec<(usize, Duration)> {
    (fates.iter().enumerate())
        .filter_map(|(i, f)| match f {
            Some(Handled::Deferred(delay)) => Some((i, *delay)),
            _ => None,
        })
        .collect()
}

/// The items waiting for rate-limit slots, with how long each waits.
fn awaiting(fates: &[Option<Handled>]) -> Vec<(usize, Duration)> {
    (fates.iter().enumerate())
        .filter_map(|(i, f)| match f {
            Some(Handled::AwaitsSlot(wait)) => Some((i, *wait)),
            _ => None,
        })
        .collect()
}

/// The items not started for lack of time (or never decided), to hand back as copies.
fn handed_back(fates: &[Option<Handled>]) -> Vec<usize> {
    (fates.iter().enumerate())
        .filter(|(_, f)| matches!(f, Some(Handled::HandedBack) | None))
        .map(|(i, _)| i)
        .collect()
}

/// What the end of a batch reports to the queue.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Tally {
    /// Per message: whether it failed (the queue returns it, every delivery in it).
    pub failed: Vec<bool>,
    /// Items not worked for lack of time, or deferred, whose copy could not be sent, and items
    /// handed back: the count the deadline's log line reports.
    pub handed_back: usize,
}

/// Which of the batch's `messages` fail, given each item's message (`of_message`), what became of
/// it, and the items whose copy was not sent (`unsent` deferred, `not_resent` handed back). An
/// item fails its message when its work failed or its copy could not be sent.
pub(super) fn tally(
    messages: usize,
    of_message: &[usize],
    fates: &[Option<Handled>],
    unsent: &[usize],
    not_resent: &[usize],
) -> Tally {
    let mut failed = vec![false; messages];
    let mut handed_back = 0;
    for (i, (&message, fate)) in of_message.iter().zip(fates).enumerate() {
        match fate {
            Some(Handled::Done(Ok(_))) => continue,
            Some(Handled::Deferred(_) | Handled::AwaitsSlot(_)) if !unsent.contains(&i) => continue,
            Some(Handled::HandedBack) | None if !not_resent.contains(&i) => {
                handed_back += 1;
                continue;
            }
            Some(Handled::Done(Err(_))) => {}
            Some(Handled::HandedBack | Handled::Deferred(_) | Handled::AwaitsSlot(_)) | None => {
                handed_back += 1
            }
        }
        failed[message] = true;
    }
    Tally {
        failed,
        handed_back,
    }
}

impl DeliveryWorker {
    /// The batch of `records` (see the module's header), with the invocation's `deadline`.
    pub(super) async fn handle_batch(
        &self,
        records: &[SqsMessage],
        deadline: Option<Instant>,
    ) -> SqsBatchResponse {
        let items = items_of(records);
        let fates = self.run_items(records, &items, deadline).await;
        let deferred = deferred(&fates);
        let awaiting = awaiting(&fates);
        let mut unsent = self.defer(&items, &deferred).await;
        unsent.extend(self.defer_packed(&items, &awaiting).await);
        let handed = handed_back(&fates);
        let not_resent = self.hand_back(records, &items, &handed).await;
        for (item, fate) in items.iter().zip(&fates) {
            if let Some(Handled::Done(Err(e))) = fate {
                let message_id = records[item.record].message_id.as_deref();
                tracing::error!(message_id, error = %e, "delivery work failed; the queue returns it");
            }
        }
        let of_message: Vec<usize> = items.iter().map(|it| it.record).collect();
        let tally = tally(records.len(), &of_message, &fates, &unsent, &not_resent);
        let counts = BatchCounts {
            deliveries: items.len(),
            awaiting: awaiting.len(),
            unsent: unsent.len(),
            handed_back: tally.handed_back,
            not_resent: not_resent.len(),
        };
        log_batch(&deferred, &counts);
        response(records, &tally.failed)
    }

    /// Runs the batch's items as their [`Schedule`] lets them start; what became of each.
    async fn run_items(
        &self,
        records: &[SqsMessage],
        items: &[Item],
        deadline: Option<Instant>,
    ) -> Vec<Option<Handled>> {
        let budget = self.webhook.timeout() + DEADLINE_MARGIN;
        let subscriptions = (items.iter())
            .map(|it| it.work.as_ref().map(|w| w.subscription_id.to_string()))
            .collect();
        let mut schedule = Schedule::new(subscriptions, self.endpoint_bound);
        let runs = &BatchRuns::default();
        let mut in_flight = futures::stream::FuturesUnordered::new();
        loop {
            while let Some(i) = schedule.start_next() {
                let (item, message) = (&items[i], &records[items[i].record]);
                in_flight.push(async move {
                    let (handled, ran_long) =
                        (self.run_item(item, message, runs, deadline, budget)).await;
                    (i, handled, ran_long)
                });
            }
            let Some((i, handled, ran_long)) = in_flight.next().await else {
                break;
            };
            schedule.finished(i, handled, ran_long, rand::random);
        }
        schedule.into_fates()
    }

    /// One item's turn: handed back when its attempt could no longer finish before the deadline
    /// (checked when its turn comes, not when the batch starts), else worked. Also whether its
    /// attempt ran long.
    async fn run_item(
        &self,
        item: &Item,
        message: &SqsMessage,
        runs: &BatchRuns,
        deadline: Option<Instant>,
        budget: Duration,
    ) -> (Handled, bool) {
        if !starts_in_time(deadline, Instant::now(), budget) {
            return (Handled::HandedBack, false);
        }
        let handled = match &item.work {
            Some(work) => self.process_timed(work, runs).await,
            None => self.handle_message(message, runs).await,
        };
        match handled {
            Ok((outcome, ran_long)) => (Handled::Done(Ok(outcome)), ran_long),
            Err(e) => (Handled::Done(Err(e)), false),
        }
    }

    /// Sends copies of the items `handed` (indexes into `items`) back to the delivery queue,
    /// [`HAND_BACK_DELAY`] later, ten to a request: a delivery's work as a message of its own
    /// (its account as the group), whichever message it came in; anything else as its message
    /// came. Returns the indexes whose copy was not sent.
    async fn hand_back(
        &self,
        records: &[SqsMessage],
        items: &[Item],
        handed: &[usize],
    ) -> Vec<usize> {
        let mut unsent = Vec::new();
        for chunk in handed.chunks(10) {
            let copies: Vec<Outgoing> = chunk
                .iter()
                .map(|&i| {
                    let message = &records[items[i].record];
                    match &items[i].work {
                        Some(work) => Outgoing {
                            body: serde_json::to_string(work).unwrap_or_default(),
                            group: Some(work.account_id.to_string()),
                            delay: HAND_BACK_DELAY,
                        },
                        None => Outgoing {
                            body: message.body.clone().unwrap_or_default(),
                            group: message.attributes.get("MessageGroupId").cloned(),
                            delay: HAND_BACK_DELAY,
                        },
                    }
                })
                .collect();
            let queue = &self.config.delivery_queue_url;
            let failed = publish_messages(&self.clients.sqs, queue, &copies).await;
            unsent.extend(failed.into_iter().map(|k| chunk[k]));
        }
        unsent
    }

    /// Puts copies of the items `deferred` (indexes into `items`, with their delays) on the
    /// delivery queue, a delivery's work to a message (whichever message it came in), ten to a
    /// request. Returns the indexes whose copy was not sent.
    async fn defer(&self, items: &[Item], deferred: &[(usize, Duration)]) -> Vec<usize> {
        let mut unsent = Vec::new();
        for chunk in deferred.chunks(10) {
            let sendable: Vec<(usize, (DeliveryWork, Duration))> = chunk
                .iter()
                .filter_map(|&(i, delay)| Some((i, (items[i].work.clone()?, delay))))
                .collect();
            let entries: Vec<(DeliveryWork, Duration)> =
                sendable.iter().map(|(_, e)| e.clone()).collect();
            let failed = crate::delivery::dispatch::publish(
                &self.clients.sqs,
                &self.config.delivery_queue_url,
                &entries,
            )
            .await;
            unsent.extend(failed.into_iter().map(|k| sendable[k].0));
        }
        unsent
    }
}

impl DeliveryWorker {
    /// Puts copies of the items `awaiting` (indexes into `items`, with how long each waits for
    /// its rate-limit slot) on the delivery queue, an account's waiting as long packed into
    /// messages ([`pack_delayed`]), ten messages to a request. Returns the indexes whose copy was
    /// not sent.
    async fn defer_packed(&self, items: &[Item], awaiting: &[(usize, Duration)]) -> Vec<usize> {
        let (indexes, works): (Vec<usize>, Vec<(DeliveryWork, Duration)>) = (awaiting.iter())
            .filter_map(|&(i, wait)| Some((i, (items[i].work.clone()?, wait))))
            .unzip();
        let messages = pack_delayed(&works);
        let mut unsent = Vec::new();
        for chunk in messages.chunks(10) {
            let outgoing: Vec<Outgoing> = chunk.iter().map(|(m, _)| m.clone()).collect();
            let queue = &self.config.delivery_queue_url;
            let failed = publish_messages(&self.clients.sqs, queue, &outgoing).await;
            let lost = failed.into_iter().flat_map(|m| chunk[m].1.iter());
            unsent.extend(lost.map(|&k| indexes[k]));
        }
        unsent
    }
}

/// The counts a batch's closing log lines report.
struct BatchCounts {
    deliveries: usize,
    /// Deliveries waiting for their rate-limit slots.
    awaiting: usize,
    unsent: usize,
    handed_back: usize,
    not_resent: usize,
}

/// The batch's closing lines: a rate limit's waiting deliveries are the limit working, not
/// trouble: a DEBUG line; a timed-out endpoint's, and what the deadline handed back, are WARNs.
fn log_batch(deferred: &[(usize, Duration)], counts: &BatchCounts) {
    let timed_out = (deferred.iter())
        .filter(|(_, d)| *d == ENDPOINT_DEFERRAL)
        .count();
    if timed_out > 0 {
        tracing::warn!(
            deferred = timed_out,
            not_sent = counts.unsent,
            deliveries = counts.deliveries,
            "an endpoint timed out in this batch; its other deliveries wait on the queue, unclaimed"
        );
    }
    if deferred.len() > timed_out || counts.awaiting > 0 {
        tracing::debug!(
            deferred = deferred.len() - timed_out + counts.awaiting,
            not_sent = counts.unsent,
            deliveries = counts.deliveries,
            "rate limits were reached in this batch; those deliveries wait on the queue, unclaimed"
        );
    }
    if counts.handed_back > 0 {
        tracing::warn!(
            handed_back = counts.handed_back,
            not_resent = counts.not_resent,
            deliveries = counts.deliveries,
            "the invocation's deadline left no time for these attempts; copies wait on the queue, unclaimed"
        );
    }
}

/// The queue's answer: the messages that failed, by message id.
fn response(records: &[SqsMessage], failed: &[bool]) -> SqsBatchResponse {
    let mut response = SqsBatchResponse::default();
    for (message, _) in records.iter().zip(failed).filter(|(_, f)| **f) {
        let mut f = BatchItemFailure::default();
        f.item_identifier = message.message_id.clone().unwrap_or_default();
        response.batch_item_failures.push(f);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::integration_delivery::DeliveryStatus;

    fn done() -> Handled {
        Handled::Done(Ok(WorkOutcome::Attempted {
            number: 1,
            status: DeliveryStatus::Delivered,
        }))
    }

    /// A schedule of items of the subscriptions named (`None`: a message handled as a whole).
    fn schedule(subscriptions: &[Option<&str>]) -> Schedule {
        let subs = subscriptions.iter().map(|s| s.map(str::to_owned)).collect();
        Schedule::new(subs, true)
    }

    /// Starts what the schedule lets start now, in its order.
    fn start_all(s: &mut Schedule) -> Vec<usize> {
        std::iter::from_fn(|| s.start_next()).collect()
    }

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

    fn message(body: &str) -> SqsMessage {
        let mut m = SqsMessage::default();
        m.body = Some(body.to_owned());
        m
    }

    #[test]
    fn every_delivery_packed_in_a_message_is_an_item_and_any_other_message_is_one_whole() {
        let packed = serde_json::to_string(&[work("acct-a", 1), work("acct-a", 2)]).unwrap();
        let single = serde_json::to_string(&work("acct-b", 3)).unwrap();
        let records = [
            message(&packed),
            message(r#"{"test_event":{}}"#),
            message(&single),
        ];
        let items = items_of(&records);
        let read: Vec<(usize, Option<String>)> = items
            .iter()
            .map(|it| {
                (
                    it.record,
                    it.work.as_ref().map(|w| w.subscription_id.to_string()),
                )
            })
            .collect();
        assert_eq!(
            read,
            [
                (0, Some("sub1".to_owned())),
                (0, Some("sub2".to_owned())),
                (1, None),
                (2, Some("sub3".to_owned())),
            ]
        );
    }

    #[test]
    fn a_subscription_holds_at_most_its_share_of_the_slots_and_later_subscriptions_go_ahead() {
        let mut subs = vec![Some("a"); PER_SUBSCRIPTION_CONCURRENCY + 5];
        subs.extend([Some("b"), None, Some("b")]);
        let mut s = schedule(&subs);
        let a = PER_SUBSCRIPTION_CONCURRENCY;
        let mut expected: Vec<usize> = (0..a).collect();
        expected.extend([a + 5, a + 6, a + 7]);
        assert_eq!(
            start_all(&mut s),
            expected,
            "a's first ten, then b's and the whole message"
        );
        // One of a's finishing frees one slot, taken by a's next waiting item in order.
        s.finished(3, done(), false, || false);
        assert_eq!(start_all(&mut s), [a]);
        s.finished(0, done(), false, || false);
        s.finished(1, done(), false, || false);
        assert_eq!(start_all(&mut s), [a + 1, a + 2]);
    }

    #[test]
    fn no_more_than_the_batch_concurrency_run_at_once_and_the_next_starts_as_one_finishes() {
        let names: Vec<String> = (0..BATCH_CONCURRENCY + 3)
            .map(|n| format!("s{n}"))
            .collect();
        let subs: Vec<Option<&str>> = names.iter().map(|n| Some(n.as_str())).collect();
        let mut s = schedule(&subs);
        assert_eq!(
            start_all(&mut s),
            (0..BATCH_CONCURRENCY).collect::<Vec<_>>()
        );
        s.finished(7, done(), false, || false);
        assert_eq!(start_all(&mut s), [BATCH_CONCURRENCY]);
    }

    #[test]
    fn an_endpoint_that_ran_long_has_its_waiting_deliveries_deferred_and_the_others_go_on() {
        let mut subs = vec![Some("slow"); PER_SUBSCRIPTION_CONCURRENCY + 3];
        subs.push(Some("fast"));
        let mut s = schedule(&subs);
        let started = start_all(&mut s);
        assert_eq!(started.len(), PER_SUBSCRIPTION_CONCURRENCY + 1);
        s.finished(0, done(), true, || false);
        // The slow endpoint's three waiting deliveries are deferred, not started.
        assert_eq!(start_all(&mut s), Vec::<usize>::new());
        for i in 1..PER_SUBSCRIPTION_CONCURRENCY {
            s.finished(i, done(), false, || false);
        }
        s.finished(PER_SUBSCRIPTION_CONCURRENCY + 3, done(), false, || false);
        assert_eq!(s.start_next(), None);
        let fates = s.into_fates();
        let waited: Vec<(usize, Duration)> = deferred(&fates);
        let a = PER_SUBSCRIPTION_CONCURRENCY;
        assert_eq!(
            waited,
            [
                (a, ENDPOINT_DEFERRAL),
                (a + 1, ENDPOINT_DEFERRAL),
                (a + 2, ENDPOINT_DEFERRAL)
            ]
        );
        assert!(matches!(fates[0], Some(Handled::Done(Ok(_)))));
        assert!(matches!(fates[a + 3], Some(Handled::Done(Ok(_)))));
        assert_eq!(handed_back(&fates), Vec::<usize>::new());
    }

    #[test]
    fn without_the_endpoint_bound_an_attempt_that_ran_long_defers_nothing() {
        let subs = vec![Some("slow".to_owned()); PER_SUBSCRIPTION_CONCURRENCY + 2];
        let mut s = Schedule::new(subs, false);
        start_all(&mut s);
        s.finished(0, done(), true, || false);
        assert_eq!(start_all(&mut s), [PER_SUBSCRIPTION_CONCURRENCY]);
        assert_eq!(deferred(&s.into_fates()), Vec::<(usize, Duration)>::new());
    }

    #[test]
    fn a_delivery_over_its_rate_limit_is_deferred_alone_by_the_limits_delay() {
        let mut s = schedule(&[Some("a"), Some("a"), Some("a")]);
        assert_eq!(start_all(&mut s), [0, 1, 2]);
        s.finished(
            0,
            Handled::Done(Ok(WorkOutcome::OverRateLimit)),
            false,
            || true,
        );
        s.finished(
            1,
            Handled::Done(Ok(WorkOutcome::OverRateLimit)),
            false,
            || false,
        );
        s.finished(2, done(), false, || {
            panic!("the coin is drawn only for a deferral")
        });
        let fates = s.into_fates();
        assert_eq!(
            deferred(&fates),
            [
                (0, crate::domain::rate_limit::deferral(true)),
                (1, crate::domain::rate_limit::deferral(false))
            ]
        );
        assert_eq!(awaiting(&fates), []);
    }

    #[test]
    fn a_delivery_waiting_for_its_rate_slot_waits_alone_as_long_as_its_slot_is_away() {
        let mut s = schedule(&[Some("a"), Some("a"), Some("b")]);
        assert_eq!(start_all(&mut s), [0, 1, 2]);
        let wait = Duration::from_secs(700);
        let waits = Handled::Done(Ok(WorkOutcome::WaitsForRateSlot(wait)));
        s.finished(1, waits, false, || panic!("no coin for a slot"));
        s.finished(0, done(), false, || false);
        s.finished(2, done(), false, || false);
        let fates = s.into_fates();
        assert_eq!(awaiting(&fates), [(1, wait)]);
        assert_eq!(deferred(&fates), []);
        assert_eq!(handed_back(&fates), Vec::<usize>::new());
        // Acknowledged once its copy is sent; its message fails when the copy could not be.
        let of_message = [0, 0, 1];
        assert_eq!(
            tally(2, &of_message, &fates, &[], &[]).failed,
            [false, false]
        );
        assert_eq!(
            tally(2, &of_message, &fates, &[1], &[]).failed,
            [true, false]
        );
    }

    #[test]
    fn an_attempt_starts_only_while_its_timeout_and_the_margin_fit_before_the_deadline() {
        let now = Instant::now();
        let budget = Duration::from_secs(10) + DEADLINE_MARGIN;
        assert!(starts_in_time(None, now, budget), "no deadline: always");
        assert!(starts_in_time(Some(now + budget), now, budget));
        assert!(!starts_in_time(
            Some(now + budget - Duration::from_millis(1)),
            now,
            budget
        ));
    }

    #[test]
    fn handed_back_are_the_deliveries_not_started_for_lack_of_time_in_the_batchs_order() {
        let fates = vec![
            Some(done()),
            Some(Handled::HandedBack),
            Some(Handled::Deferred(ENDPOINT_DEFERRAL)),
            None,
            Some(Handled::HandedBack),
        ];
        assert_eq!(handed_back(&fates), [1, 3, 4]);
        assert_eq!(deferred(&fates), [(2, ENDPOINT_DEFERRAL)]);
    }

    #[test]
    fn a_message_fails_only_when_one_of_its_deliveries_failed_or_could_not_be_copied_back() {
        let fates = vec![
            // Message 0: done, and deferred with its copy sent: acknowledged.
            Some(done()),
            Some(Handled::Deferred(ENDPOINT_DEFERRAL)),
            // Message 1: handed back with its copy sent, and one whose storage failed.
            Some(Handled::HandedBack),
            Some(Handled::Done(Err(WorkerError::Malformed("x".into())))),
            // Message 2: a deferred copy not sent, and a handed-back copy not sent.
            Some(Handled::Deferred(ENDPOINT_DEFERRAL)),
            Some(Handled::HandedBack),
            // Message 3: handed back, its copy sent: acknowledged.
            Some(Handled::HandedBack),
        ];
        let of_message = [0, 0, 1, 1, 2, 2, 3];
        let tally = tally(4, &of_message, &fates, &[4], &[5]);
        assert_eq!(
            tally,
            Tally {
                failed: vec![false, true, true, false],
                handed_back: 4,
            }
        );
    }
}
