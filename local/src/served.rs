//! A served stack: the API (with its console) on loopback over a [`Pipeline`], and the pipeline
//! pumped in the background as Lambda's pollers and schedules would run it, so that what someone
//! does in a browser (a retry, a replay, a requeue) is actually delivered. `make demo` ends by
//! serving one; the browser tests run against one (`local/src/bin/console_stack.rs`).
//!
//! The pipeline's clock is a [`ManualClock`]; while the pump runs, it follows the wall clock (it
//! never moves back), so the console's relative times and the retry schedule are real ones.

use crate::api_server::serve_loopback;
use crate::pipeline::Pipeline;
use crate::queues::QueueTap;
use crate::streams::StreamTap;
use anyhow::{bail, Result};
use serde_json::Value;
use shared::clock::{Clock, ManualClock, SystemClock};
use shared::notify::stream::NotificationStream;
use shared::notify::worker::NotificationWorker;
use shared::web::ApiState;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

/// How often the background pump looks for work (Lambda's stream pollers poll about four times
/// a second).
pub const PUMP_INTERVAL: Duration = Duration::from_millis(250);
/// How often it runs the dispatcher's sweep (a minute in AWS; shorter here, so a retry or a
/// replay made in the console is published within seconds).
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(2);
/// How often it runs a roll-up pass of the event monitor (the reconcile function's schedule).
pub const ROLL_UP_INTERVAL: Duration = Duration::from_secs(5);

/// The notification pipeline as the `notify` function is wired: the notification table's stream
/// into the fan-out, the notification queue into the channel worker.
pub struct NotificationPump {
    stream: NotificationStream,
    worker: NotificationWorker,
    tap: Mutex<StreamTap>,
    queue: QueueTap,
}

impl NotificationPump {
    /// On `p`'s stack and clock, with the standard channel adapters.
    pub async fn new(p: &Pipeline) -> Self {
        let clock: Arc<dyn Clock> = Arc::new(p.clock.clone());
        let stream = NotificationStream::new(
            p.stack.clients.clone(),
            p.stack.config.clone(),
            clock.clone(),
        );
        let worker =
            NotificationWorker::new(p.stack.clients.clone(), p.stack.config.clone(), clock);
        // SES (and the emulator) refuse mail from an unverified sender.
        let _ = p
            .stack
            .clients
            .ses
            .create_email_identity()
            .email_identity(&p.stack.config.notification_sender)
            .send()
            .await;
        NotificationPump {
            stream,
            worker,
            tap: Mutex::new(p.stack.stream("NotificationTable")),
            queue: p.stack.queue("NotificationQueue"),
        }
    }

    /// Fans out what the stream holds (a fan-out's own writes are records of the next drain) and
    /// sends what the queue holds, until nothing moves.
    pub async fn pump(&self) -> Result<()> {
        for _ in 0..10 {
            let mut records = 0;
            {
                let mut tap = self.tap.lock().await;
                for _ in 0..10 {
                    let r = tap.drain(|e| self.stream.handle(e)).await?;
                    if r.records == 0 {
                        break;
                    }
                    records += r.records;
                }
            }
            let queue = self.queue.drain(|e| self.worker.handle(e), 100).await?;
            if records == 0 && queue.messages == 0 {
                break;
            }
        }
        Ok(())
    }
}

/// The API on loopback over a pipeline, and the pipeline's pump ([`ServedStack::pump_until`]).
pub struct ServedStack {
    pub addr: SocketAddr,
    pub pipeline: Arc<Pipeline>,
    server: JoinHandle<()>,
}

impl ServedStack {
    /// Serves `state` (built on `pipeline`'s stack and clock) on a free loopback port. Nothing is
    /// pumped yet: the caller may still drive the pipeline itself.
    pub async fn serve(pipeline: Arc<Pipeline>, state: ApiState) -> Result<Self> {
        let (addr, server) = serve_loopback(state).await?;
        Ok(ServedStack {
            addr,
            pipeline,
            server,
        })
    }

    /// `http://127.0.0.1:port` and `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Pumps the pipeline (and `notifications`, when given) with the clock following the wall
    /// clock, until `stop` resolves; returns its output. A pass in flight always finishes (the
    /// stop is seen between passes); a failing pass is logged and the next one runs.
    ///
    /// The pump runs in the caller's task rather than a spawned one: the handlers' futures are
    /// not provably `Send` behind the drains' closures.
    pub async fn pump_until<T>(
        &self,
        notifications: Option<&NotificationPump>,
        stop: impl Future<Output = T>,
    ) -> T {
        let p = &self.pipeline;
        let mut stop = std::pin::pin!(stop);
        let mut last_sweep = Instant::now();
        let mut last_roll_up = Instant::now();
        loop {
            follow_wall_clock(&p.clock);
            if let Err(e) = p.pump().await {
                tracing::warn!(error = %format!("{e:#}"), "background pump");
            }
            if last_sweep.elapsed() >= SWEEP_INTERVAL {
                last_sweep = Instant::now();
                if let Err(e) = p.dispatcher.sweep().await {
                    tracing::warn!(error = %e, "background sweep");
                }
            }
            if last_roll_up.elapsed() >= ROLL_UP_INTERVAL {
                last_roll_up = Instant::now();
                if let Err(e) = p.roll_up_pass().await {
                    tracing::warn!(error = %format!("{e:#}"), "background roll-up");
                }
            }
            if let Some(n) = notifications {
                if let Err(e) = n.pump().await {
                    tracing::warn!(error = %format!("{e:#}"), "background notifications");
                }
            }
            tokio::select! {
                out = &mut stop => return out,
                _ = tokio::time::sleep(PUMP_INTERVAL) => {}
            }
        }
    }

    /// Stops the server.
    pub fn stop(self) {
        self.server.abort();
    }
}

/// Sets `clock` to `story` (and ten minutes more) before the wall clock: a story that walks the
/// clock through `story` ends about now, and the console served afterwards shows real times.
pub fn back_date(clock: &ManualClock, story: Duration) {
    clock.set(
        SystemClock
            .now()
            .minus(story + Duration::from_secs(10 * 60)),
    );
}

/// Moves `clock` up to the wall clock when it is behind (never back).
pub fn follow_wall_clock(clock: &ManualClock) {
    let wall = SystemClock.now();
    if wall > clock.now() {
        clock.set(wall);
    }
}

/// A future that resolves (to the signal's name) on SIGINT or SIGTERM; the handlers are in place
/// from this call on, so a signal that arrives before the future is polled is not lost.
pub fn interrupted() -> Result<impl Future<Output = &'static str>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        }
    })
}

/// The served API over HTTP, as a client calls it (bearer tokens, JSON bodies).
pub struct HttpApi {
    pub base: String,
    http: reqwest::Client,
    /// Print one line per call (the demo's transcript).
    echo: bool,
}

impl HttpApi {
    pub fn new(base: String, echo: bool) -> Self {
        HttpApi {
            base,
            http: reqwest::Client::new(),
            echo,
        }
    }

    /// Calls `method path` with `token` (none when empty) and `body`; a status other than 2xx is
    /// an error carrying the answer.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> Result<Value> {
        let mut request = self
            .http
            .request(method.clone(), format!("{}{path}", self.base));
        if !token.is_empty() {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await?;
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            bail!("{method} {path} answered {status}: {body}");
        }
        if self.echo {
            let shown = if path.len() > 60 {
                format!("{}…", &path[..59])
            } else {
                path.to_string()
            };
            println!("   {method:<4} {shown:<60} → {status}");
        }
        Ok(body)
    }

    pub async fn post(&self, path: &str, token: &str, body: Value) -> Result<Value> {
        self.call(reqwest::Method::POST, path, token, Some(body))
            .await
    }

    pub async fn get(&self, path: &str, token: &str) -> Result<Value> {
        self.call(reqwest::Method::GET, path, token, None).await
    }
}
