//! A real HTTP receiver on loopback whose answers a test scripts: it records every request (so a
//! test can check headers, signatures and bodies) and replies from a queue of scripted replies,
//! falling back to a default.

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;

/// How the receiver answers one request.
#[derive(Debug, Clone)]
pub enum Reply {
    Status(u16),
    /// A status with extra headers (e.g. `Retry-After`) and a body.
    Full {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// Records the request (the change is "applied") but answers only after `delay`: longer than
    /// the client's timeout, this is a lost acknowledgement.
    Hang(Duration),
    /// Records the request and closes the connection without answering.
    Drop,
    /// A hostile receiver: answers `status` at once, then streams a body of `chunks` chunks of
    /// `chunk_bytes` each, one every `every`, until it is done or the client closes the
    /// connection. What it managed to hand to the connection is counted ([`Receiver::streamed_bytes`]).
    Stream {
        status: u16,
        chunk_bytes: usize,
        chunks: usize,
        every: Duration,
    },
}

impl Reply {
    /// 100 MiB in 64 KiB chunks, one per millisecond (about 1.6 s when read in full).
    pub fn hostile_stream(status: u16) -> Self {
        Reply::Stream {
            status,
            chunk_bytes: 64 << 10,
            chunks: 1600,
            every: Duration::from_millis(1),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ReceivedRequest {
    pub method: String,
    pub path: String,
    /// Lower-case header names.
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

impl ReceivedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// Picks the reply of each request itself, in place of the script and the default (the chaos
/// run's seeded endpoints). Called once per request, in arrival order.
pub type Responder = Arc<dyn Fn(&ReceivedRequest) -> Reply + Send + Sync>;

#[derive(Default)]
struct State {
    script: VecDeque<Reply>,
    default: Option<Reply>,
    responder: Option<Responder>,
    received: Vec<ReceivedRequest>,
    /// When each request arrived (same order as `received`).
    arrived: Vec<std::time::Instant>,
    /// Body bytes of `Reply::Stream` answers handed to their connections.
    streamed: Arc<std::sync::atomic::AtomicUsize>,
}

#[derive(Clone)]
pub struct Receiver {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    task: Arc<tokio::task::JoinHandle<()>>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if Arc::strong_count(&self.task) == 1 {
            self.task.abort();
        }
    }
}

impl Receiver {
    /// Starts a receiver on an ephemeral loopback port that answers 200 unless scripted otherwise.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port for the test receiver");
        let addr = listener.local_addr().expect("local address");
        let state = Arc::new(Mutex::new(State {
            default: Some(Reply::Status(200)),
            ..State::default()
        }));
        let shared = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let state = shared.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| handle(state.clone(), req));
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Receiver {
            addr,
            state,
            task: Arc::new(task),
        }
    }

    /// `http://127.0.0.1:{port}{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Queues replies, used in order before the default.
    pub fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        self.state.lock().unwrap().script.extend(replies);
    }

    /// Every later request is answered by `responder`.
    pub fn set_responder(&self, responder: Responder) {
        self.state.lock().unwrap().responder = Some(responder);
    }

    pub fn set_default(&self, reply: Reply) {
        self.state.lock().unwrap().default = Some(reply);
    }

    pub fn received(&self) -> Vec<ReceivedRequest> {
        self.state.lock().unwrap().received.clone()
    }

    /// Every request with the moment it arrived.
    pub fn received_with_times(&self) -> Vec<(std::time::Instant, ReceivedRequest)> {
        let s = self.state.lock().unwrap();
        s.arrived
            .iter()
            .copied()
            .zip(s.received.iter().cloned())
            .collect()
    }

    pub fn count(&self) -> usize {
        self.state.lock().unwrap().received.len()
    }

    /// Body bytes the `Reply::Stream` answers have handed to their connections so far.
    pub fn streamed_bytes(&self) -> usize {
        let s = self.state.lock().unwrap();
        s.streamed.load(std::sync::atomic::Ordering::Relaxed)
    }
}

type Body = BoxBody<Bytes, std::io::Error>;

async fn handle(
    state: Arc<Mutex<State>>,
    req: Request<hyper::body::Incoming>,
) -> Result<Response<Body>, std::io::Error> {
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes().to_vec())
        .unwrap_or_default();
    let (reply, streamed) = {
        let mut s = state.lock().unwrap();
        s.arrived.push(std::time::Instant::now());
        s.received.push(ReceivedRequest {
            method: parts.method.to_string(),
            path: parts.uri.path().to_string(),
            headers: parts
                .headers
                .iter()
                .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
                .collect(),
            body,
        });
        let reply = match s.responder.clone() {
            Some(responder) => responder(s.received.last().expect("just recorded")),
            None => s
                .script
                .pop_front()
                .or_else(|| s.default.clone())
                .unwrap_or(Reply::Status(200)),
        };
        (reply, s.streamed.clone())
    };
    match reply {
        Reply::Status(code) => Ok(response(code, &[], String::new())),
        Reply::Full {
            status,
            headers,
            body,
        } => Ok(response(status, &headers, body)),
        Reply::Hang(delay) => {
            tokio::time::sleep(delay).await;
            Ok(response(200, &[], String::new()))
        }
        Reply::Drop => Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionAborted,
            "scripted connection drop",
        )),
        Reply::Stream {
            status,
            chunk_bytes,
            chunks,
            every,
        } => {
            let chunk = Bytes::from(vec![b'x'; chunk_bytes]);
            // Each chunk is counted when hyper asks for it, i.e. once the previous one was
            // written: a client that closes the connection stops the stream.
            let body = futures::stream::unfold(0usize, move |sent| {
                let (chunk, streamed) = (chunk.clone(), streamed.clone());
                async move {
                    if sent == chunks {
                        return None;
                    }
                    tokio::time::sleep(every).await;
                    streamed.fetch_add(chunk.len(), std::sync::atomic::Ordering::Relaxed);
                    Some((Ok(hyper::body::Frame::data(chunk)), sent + 1))
                }
            });
            let mut r = Response::new(BodyExt::boxed(StreamBody::new(body)));
            *r.status_mut() = status_code(status);
            Ok(r)
        }
    }
}

fn status_code(status: u16) -> StatusCode {
    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

fn response(status: u16, headers: &[(String, String)], body: String) -> Response<Body> {
    let full = Full::new(Bytes::from(body)).map_err(|never| match never {});
    let mut r = Response::new(BodyExt::boxed(full));
    *r.status_mut() = status_code(status);
    for (k, v) in headers {
        if let (Ok(name), Ok(value)) = (
            http::header::HeaderName::from_bytes(k.as_bytes()),
            http::HeaderValue::from_str(v),
        ) {
            r.headers_mut().insert(name, value);
        }
    }
    r
}
