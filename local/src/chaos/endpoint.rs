//! The chaos run's webhook endpoints: loopback receivers whose every answer is drawn from the
//! run's seed (per delivery id and arrival of that id, so a delivery meets the same answers
//! whatever order the requests arrive in), logged with the virtual time it arrived at. The log is
//! the receiver's own record of what happened; the checks read it, never the code's counters.

use crate::receiver::{ReceivedRequest, Receiver, Reply};
use serde::Serialize;
use shared::clock::{Clock, ManualClock};
use shared::domain::time::Timestamp;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What an endpoint did with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Answer {
    /// 200 at once: acknowledged.
    Ok,
    /// 500 or 503 (no Retry-After).
    ServerError { status: u16 },
    /// 429, with or without a Retry-After in seconds.
    TooMany { retry_after: Option<u64> },
    /// Applied, then held past the attempt timeout (the acknowledgement comes too late).
    Hang,
    /// Applied, then the connection is closed without an answer.
    LostAck,
    /// A 4xx no retry can fix.
    Reject { status: u16 },
}

impl Answer {
    /// The HTTP status the worker sees (none for a hang or a dropped connection).
    pub fn status(self) -> Option<u16> {
        match self {
            Answer::Ok => Some(200),
            Answer::ServerError { status } | Answer::Reject { status } => Some(status),
            Answer::TooMany { .. } => Some(429),
            Answer::Hang | Answer::LostAck => None,
        }
    }

    /// The attempt class the answer must be recorded with.
    pub fn class(self) -> &'static str {
        match self {
            Answer::Ok => "success",
            Answer::Reject { .. } => "permanent",
            _ => "transient",
        }
    }

    /// The Retry-After the worker must honour.
    pub fn retry_after(self) -> Option<Duration> {
        match self {
            Answer::TooMany { retry_after } => retry_after.map(Duration::from_secs),
            _ => None,
        }
    }

    /// Whether the endpoint applied the request and the worker heard so.
    pub fn acknowledged(self) -> bool {
        self == Answer::Ok
    }

    pub fn is_fault(self) -> bool {
        self != Answer::Ok
    }

    fn reply(self, hang: Duration) -> Reply {
        match self {
            Answer::Ok => Reply::Status(200),
            Answer::ServerError { status } | Answer::Reject { status } => Reply::Status(status),
            Answer::TooMany { retry_after } => Reply::Full {
                status: 429,
                headers: retry_after
                    .map(|s| vec![("retry-after".to_string(), s.to_string())])
                    .unwrap_or_default(),
                body: String::new(),
            },
            Answer::Hang => Reply::Hang(hang),
            Answer::LostAck => Reply::Drop,
        }
    }
}

/// One request as the endpoint logged it.
#[derive(Debug, Clone)]
pub struct Logged {
    /// The `webhook-id` header: the delivery id.
    pub webhook_id: String,
    /// Which arrival of this id it was (0 for the first).
    pub nth: u32,
    /// The virtual time it arrived at.
    pub at: Timestamp,
    pub answer: Answer,
    pub request: ReceivedRequest,
}

/// How an endpoint misbehaves.
#[derive(Debug, Clone, Copy)]
pub struct Behaviour {
    /// Probability that a request meets a fault (split among the kinds below).
    pub fault_rate: f64,
    /// The first this many distinct deliveries are rejected with a 400, on every attempt: an
    /// outage no retry fixes, long enough to pause the subscription.
    pub outage_deliveries: usize,
}

#[derive(Default)]
struct Book {
    log: Vec<Logged>,
    arrivals: HashMap<String, u32>,
    /// Distinct ids in order of first arrival.
    distinct: usize,
    first_rank: HashMap<String, usize>,
}

/// A receiver answering as its [`Behaviour`] and the seed decide.
#[derive(Clone)]
pub struct Endpoint {
    pub receiver: Receiver,
    book: Arc<Mutex<Book>>,
}

impl Endpoint {
    pub async fn start(
        seed: u64,
        index: usize,
        behaviour: Behaviour,
        clock: ManualClock,
        hang: Duration,
    ) -> Self {
        let receiver = Receiver::start().await;
        let book = Arc::new(Mutex::new(Book::default()));
        let shared = book.clone();
        receiver.set_responder(Arc::new(move |request: &ReceivedRequest| {
            let id = request.header("webhook-id").unwrap_or_default().to_string();
            let mut book = shared.lock().unwrap();
            let nth = *book.arrivals.get(&id).unwrap_or(&0);
            book.arrivals.insert(id.clone(), nth + 1);
            let rank = match book.first_rank.get(&id) {
                Some(rank) => *rank,
                None => {
                    let rank = book.distinct;
                    book.distinct += 1;
                    book.first_rank.insert(id.clone(), rank);
                    rank
                }
            };
            let answer = if rank < behaviour.outage_deliveries {
                Answer::Reject { status: 400 }
            } else {
                draw(seed, index, &id, nth, behaviour.fault_rate)
            };
            book.log.push(Logged {
                webhook_id: id,
                nth,
                at: clock.now(),
                answer,
                request: request.clone(),
            });
            answer.reply(hang)
        }));
        Endpoint { receiver, book }
    }

    pub fn log(&self) -> Vec<Logged> {
        self.book.lock().unwrap().log.clone()
    }
}

/// The answer to the `nth` arrival of delivery `id` at endpoint `index`: a fault with
/// probability `fault_rate`, split 30 % 5xx, 15 % 429 without and 15 % with Retry-After, 10 %
/// hang, 25 % lost acknowledgement, 5 % permanent 400.
pub fn draw(seed: u64, index: usize, id: &str, nth: u32, fault_rate: f64) -> Answer {
    let h = mix(seed ^ (index as u64).wrapping_mul(0x9e37_79b9), id, nth);
    let u = (h >> 11) as f64 / (1u64 << 53) as f64;
    if u >= fault_rate {
        return Answer::Ok;
    }
    let v = u / fault_rate;
    let pick = (h & 0xff) as usize;
    match v {
        v if v < 0.30 => Answer::ServerError {
            status: [500, 503][pick % 2],
        },
        v if v < 0.45 => Answer::TooMany { retry_after: None },
        // 30 s is shorter than any scheduled wait (ignored), 120 s and 900 s longer than some.
        v if v < 0.60 => Answer::TooMany {
            retry_after: Some([30, 120, 900][pick % 3]),
        },
        v if v < 0.70 => Answer::Hang,
        v if v < 0.95 => Answer::LostAck,
        _ => Answer::Reject { status: 400 },
    }
}

/// splitmix64 over the seed, the id (FNV-1a) and the arrival.
pub(crate) fn mix(seed: u64, id: &str, n: u32) -> u64 {
    let name = id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let mut z = seed ^ name.rotate_left(29) ^ u64::from(n).wrapping_mul(0xd6e8_feb8_6659_fd93);
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoints_answers_depend_only_on_the_seed_the_delivery_and_its_arrival() {
        let answers = |seed| {
            (0..2000)
                .map(|i| draw(seed, 1, &format!("dlv{}", i / 4), i % 4, 0.3))
                .collect::<Vec<_>>()
        };
        assert_eq!(answers(5), answers(5));
        assert_ne!(answers(5), answers(6));
        let faults = answers(5).iter().filter(|a| a.is_fault()).count();
        assert!((500..700).contains(&faults), "about 30 %: {faults}");
    }
}
