//! A Lambda Runtime API on loopback, for running a function's real binary as Lambda runs it: the
//! binary (through the `lambda_runtime` crate) asks `GET /2018-06-01/runtime/invocation/next` for
//! an event and posts its answer to `…/invocation/{id}/response` or `…/invocation/{id}/error`,
//! or a failed start to `…/init/error`. Every answer is recorded by request id.
//!
//! Each event carries a real deadline (now plus the function's timeout), so a function that
//! budgets its work by the time it has left sees the time Lambda would give it.

use anyhow::{anyhow, Result};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::Value;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, watch};

/// What a function answered to one event.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// `POST …/invocation/{id}/response`: the handler's output.
    Response(Value),
    /// `POST …/invocation/{id}/error`: the error type header and the error document.
    Error { error_type: String, body: Value },
}

/// An event waiting for the function's next `GET …/invocation/next`.
struct Invocation {
    request_id: String,
    deadline_ms: u128,
    payload: Bytes,
}

/// What the function did so far.
#[derive(Default)]
struct Record {
    /// `GET …/invocation/next` requests received (the function is ready for an event).
    polls: usize,
    answers: HashMap<String, Answer>,
    init_error: Option<Value>,
}

struct Shared {
    function_arn: String,
    /// One poller takes the next event at a time (Lambda runs one invocation per process).
    pending: tokio::sync::Mutex<mpsc::UnboundedReceiver<Invocation>>,
    record: Mutex<Record>,
    /// Bumped on every change of `record`, so waiters re-check it.
    changed: watch::Sender<u64>,
}

impl Shared {
    fn update(&self, change: impl FnOnce(&mut Record)) {
        change(&mut self.record.lock().expect("the record lock"));
        self.changed.send_modify(|n| *n += 1);
    }
}

pub struct RuntimeApi {
    address: SocketAddr,
    shared: Arc<Shared>,
    events: mpsc::UnboundedSender<Invocation>,
    server: tokio::task::JoinHandle<()>,
}

impl RuntimeApi {
    /// Serves the Runtime API on a free loopback port for the function `function_arn`.
    pub async fn start(function_arn: String) -> Result<Self> {
        let (events, pending) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            function_arn,
            pending: tokio::sync::Mutex::new(pending),
            record: Mutex::new(Record::default()),
            changed: watch::Sender::new(0),
        });
        let app = Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next))
            .route(
                "/2018-06-01/runtime/invocation/{id}/response",
                post(response),
            )
            .route("/2018-06-01/runtime/invocation/{id}/error", post(error))
            .route("/2018-06-01/runtime/init/error", post(init_error))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(RuntimeApi {
            address,
            shared,
            events,
            server,
        })
    }

    /// The value of `AWS_LAMBDA_RUNTIME_API` (host and port, as Lambda sets it).
    pub fn address(&self) -> String {
        self.address.to_string()
    }

    /// Hands `payload` to the function's next poll, due within `timeout`; returns its request id.
    pub fn invoke(&self, payload: &Value, timeout: Duration) -> Result<String> {
        let request_id = uuid::Uuid::new_v4().to_string();
        let deadline = SystemTime::now() + timeout;
        self.events
            .send(Invocation {
                request_id: request_id.clone(),
                deadline_ms: deadline.duration_since(UNIX_EPOCH)?.as_millis(),
                payload: Bytes::from(serde_json::to_vec(payload)?),
            })
            .map_err(|_| anyhow!("the Runtime API has stopped"))?;
        Ok(request_id)
    }

    /// The answer to `request_id`, once there is one.
    pub fn answer(&self, request_id: &str) -> Option<Answer> {
        self.read(|r| r.answers.get(request_id).cloned())
    }

    /// How many times the function has asked for an event.
    pub fn polls(&self) -> usize {
        self.read(|r| r.polls)
    }

    /// The error the function reported instead of starting, if it did.
    pub fn init_error(&self) -> Option<Value> {
        self.read(|r| r.init_error.clone())
    }

    /// Waits up to `limit` for `found` to see something in what the function did; `None` when
    /// nothing turned up in time.
    pub async fn wait_for<T>(
        &self,
        limit: Duration,
        found: impl Fn(&Self) -> Option<T>,
    ) -> Option<T> {
        let mut changed = self.shared.changed.subscribe();
        let waiting = async {
            loop {
                if let Some(t) = found(self) {
                    return t;
                }
                if changed.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::time::timeout(limit, waiting).await.ok()
    }

    fn read<T>(&self, f: impl FnOnce(&Record) -> T) -> T {
        f(&self.shared.record.lock().expect("the record lock"))
    }
}

impl Drop for RuntimeApi {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn next(State(shared): State<Arc<Shared>>) -> Response {
    shared.update(|r| r.polls += 1);
    let invocation = shared.pending.lock().await.recv().await;
    let Some(invocation) = invocation else {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
    let mut headers = HeaderMap::new();
    let mut set = |name: &'static str, value: String| {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    };
    set(
        "lambda-runtime-aws-request-id",
        invocation.request_id.clone(),
    );
    set(
        "lambda-runtime-deadline-ms",
        invocation.deadline_ms.to_string(),
    );
    set(
        "lambda-runtime-invoked-function-arn",
        shared.function_arn.clone(),
    );
    set(
        "lambda-runtime-trace-id",
        format!(
            "Root=1-{:08x}-{};Sampled=0",
            invocation.deadline_ms / 1000,
            &invocation.request_id.replace('-', "")[..24]
        ),
    );
    set("content-type", "application/json".into());
    (headers, invocation.payload).into_response()
}

async fn response(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Bytes,
) -> StatusCode {
    let answer = Answer::Response(document(&body));
    shared.update(|r| {
        r.answers.insert(id, answer);
    });
    StatusCode::ACCEPTED
}

async fn error(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let answer = Answer::Error {
        error_type: error_type(&headers),
        body: document(&body),
    };
    shared.update(|r| {
        r.answers.insert(id, answer);
    });
    StatusCode::ACCEPTED
}

async fn init_error(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let mut reported = document(&body);
    if let Value::Object(fields) = &mut reported {
        fields.insert("errorTypeHeader".into(), error_type(&headers).into());
    }
    shared.update(|r| r.init_error = Some(reported));
    StatusCode::ACCEPTED
}

fn error_type(headers: &HeaderMap) -> String {
    headers
        .get("lambda-runtime-function-error-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// A posted body as JSON, or as a JSON string when it is not JSON.
fn document(body: &[u8]) -> Value {
    serde_json::from_slice(body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()))
}
