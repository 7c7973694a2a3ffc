//! A rate-limited backlog on a clock that runs `factor` times faster than real time, for the rate
//! limit's backlog test and the bench's "rate-limited backlog": a backlog that takes half an hour
//! of its rate drains in minutes. The manual clock is set from the real time elapsed (times the
//! factor) as the run goes, and the worker's SQS delays are divided by the factor on their way to
//! the emulator ([`FastDelays`], rounded up: a copy never comes before its time on the clock), so
//! the queue's seconds and the clock's agree. Beside the worker, the dispatcher's sweep runs every
//! minute of the clock and the roll-up walk as often as asked (template.yaml: every ten minutes;
//! more often gives a delivery at least as many chances to be published again).

use crate::pipeline::Pipeline;
use anyhow::Result;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::BeforeSerializationInterceptorContextMut;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use shared::aws::Clients;
use shared::delivery::dispatch::SWEEP_EVERY;
use shared::delivery::worker::DeliveryWorker;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Divides the SQS delays of the requests it sees by `factor`, rounding up.
#[derive(Debug, Clone, Copy)]
pub struct FastDelays {
    pub factor: u32,
}

impl FastDelays {
    fn scaled(&self, seconds: i32) -> i32 {
        let factor = self.factor.max(1) as i32;
        (seconds + factor - 1) / factor
    }
}

impl Intercept for FastDelays {
    fn name(&self) -> &'static str {
        "FastDelays"
    }

    fn modify_before_serialization(
        &self,
        context: &mut BeforeSerializationInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        use aws_sdk_sqs::operation::{send_message, send_message_batch};
        let input = context.input_mut();
        if let Some(i) = input.downcast_mut::<send_message_batch::SendMessageBatchInput>() {
            for entry in i.entries.iter_mut().flatten() {
                entry.delay_seconds = entry.delay_seconds.map(|d| self.scaled(d));
            }
        } else if let Some(i) = input.downcast_mut::<send_message::SendMessageInput>() {
            i.delay_seconds = i.delay_seconds.map(|d| self.scaled(d));
        }
        Ok(())
    }
}

/// `clients` whose SQS delays run `factor` times faster (everything else as it is: metered,
/// faulty).
pub fn fast_clients(clients: &Clients, factor: u32) -> Clients {
    let sqs = clients
        .sqs
        .config()
        .to_builder()
        .interceptor(FastDelays { factor })
        .build();
    Clients {
        sqs: aws_sdk_sqs::Client::from_conf(sqs),
        ..clients.clone()
    }
}

/// A delivery worker of `p`'s stack and clock whose copies' delays run `factor` times faster.
pub fn fast_worker(p: &Pipeline, factor: u32) -> DeliveryWorker {
    let clients = fast_clients(&p.stack.clients, factor);
    DeliveryWorker::new(clients, p.stack.config.clone(), Arc::new(p.clock.clone()))
}

/// What a run on the fast clock came to.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FastRun {
    /// The clock's time the run took.
    pub elapsed: Duration,
    /// Delivery-queue messages the worker was handed, and in how many batches.
    pub messages: usize,
    pub batches: usize,
    /// Deliveries the sweep published again, and lost first dispatches the roll-up put back.
    pub swept: u32,
    pub requeued: u32,
}

impl FastRun {
    /// Worker invocations as a real clock would have them, `initial` of the messages having been
    /// on the queue when the run began: those ten to a batch, then one for each later message (a
    /// copy comes at its slot's second, alone in its batch at most; the fast clock bunches
    /// several seconds' copies into one batch). An upper bound.
    pub fn invocations(&self, initial: usize) -> usize {
        initial.div_ceil(10) + self.messages.saturating_sub(initial)
    }
}

/// Drains the delivery queue into `worker` on `p`'s clock running `factor` times faster than real
/// time, until `done` holds (checked after each drain) or `limit` of the clock has passed; beside
/// it, the sweep every minute of the clock and the roll-up walk every `rollup_every`.
pub async fn run_fast(
    p: &Pipeline,
    worker: &DeliveryWorker,
    factor: u32,
    (limit, rollup_every): (Duration, Duration),
    mut done: impl FnMut() -> bool,
) -> Result<FastRun> {
    let (start, started) = (p.now(), Instant::now());
    let clock = p.clock.clone();
    let ticker = tokio::spawn(async move {
        loop {
            clock.set(start.plus(started.elapsed() * factor));
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    let finished = AtomicBool::new(false);
    let drain = async {
        let tap = p.stack.queue("DeliveryQueue");
        let mut run = FastRun::default();
        let outcome = loop {
            let drained = match tap.drain(|e| worker.handle(e), 1000).await {
                Ok(d) => d,
                Err(e) => break Err(e),
            };
            run.messages += drained.messages;
            run.batches += drained.batches;
            run.elapsed = p.now().since(start);
            if done() || run.elapsed > limit {
                break Ok(run);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        finished.store(true, Ordering::SeqCst);
        outcome
    };
    let schedules = async {
        let (mut swept, mut requeued) = (0, 0);
        let (mut next_sweep, mut next_walk) = (start.plus(SWEEP_EVERY), start.plus(rollup_every));
        while !finished.load(Ordering::SeqCst) {
            if p.now() >= next_walk {
                next_walk = next_walk.plus(rollup_every);
                let deadline = Instant::now() + Duration::from_secs(600);
                requeued += p.rollup.walk(10_000_000, deadline).await?.rollup.requeued;
            }
            if p.now() >= next_sweep {
                next_sweep = next_sweep.plus(SWEEP_EVERY);
                swept += p.dispatcher.sweep().await?.published;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        anyhow::Ok((swept, requeued))
    };
    let (run, schedules) = tokio::join!(drain, schedules);
    ticker.abort();
    let (swept, requeued) = schedules?;
    Ok(FastRun {
        swept,
        requeued,
        ..run?
    })
}
