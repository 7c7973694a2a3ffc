//! The chaos run's SDK faults: every kind of request of the fault matrix meets each fault, then
//! every request meets its operation's rates.

use crate::faults::{Fault, Matcher, Schedule};
use crate::request_kinds::{RequestKind, KINDS};
use std::time::Duration;

/// Each operation's fault rates: transaction conflict, throttle, internal error, lost answer
/// (and 2 % latency).
const RATES: [(&str, f64, f64, f64, f64); 11] = [
    ("TransactWriteItems", 0.04, 0.02, 0.01, 0.01),
    ("UpdateItem", 0.0, 0.02, 0.01, 0.01),
    ("PutItem", 0.0, 0.02, 0.01, 0.01),
    ("GetItem", 0.0, 0.02, 0.01, 0.0),
    ("Query", 0.0, 0.02, 0.01, 0.0),
    ("BatchGetItem", 0.0, 0.02, 0.01, 0.0),
    ("BatchWriteItem", 0.0, 0.02, 0.01, 0.01),
    ("SendMessageBatch", 0.0, 0.02, 0.01, 0.01),
    ("SendMessage", 0.0, 0.02, 0.01, 0.01),
    ("Decrypt", 0.0, 0.02, 0.01, 0.0),
    ("SendEmail", 0.0, 0.02, 0.01, 0.01),
];

/// The faults every kind of request meets first, in turn: a throttle and an internal error that
/// outlast the SDK's tries, a lost answer, and for a transaction two conflicts.
pub fn lead(kind: &RequestKind) -> Vec<Option<Fault>> {
    let tries = 3;
    let mut lead = vec![Some(Fault::Throttle); tries];
    lead.extend(vec![Some(Fault::InternalError); tries]);
    lead.push(Some(Fault::LostResponse));
    if kind.transactional() {
        lead.extend([
            Some(Fault::TransactionConflict),
            Some(Fault::TransactionConflict),
        ]);
    }
    lead
}

/// The seeded SDK faults on the handlers' calls: every kind of request of the fault matrix
/// ([`KINDS`]) first meets each fault in turn ([`lead`]), then transaction conflicts, throttles,
/// internal errors, lost answers and latency at its operation's rates; the requests of no listed
/// kind meet their operation's rates.
pub fn sdk_schedule(seed: u64, scale: f64) -> Schedule {
    let r = |rate: f64| (rate * scale).min(1.0);
    let with_rates = |mut s: Schedule, m: &dyn Fn() -> Matcher, operation: &str| {
        let Some(&(_, conflict, throttle, internal, lost)) =
            RATES.iter().find(|(o, ..)| *o == operation)
        else {
            return s;
        };
        if conflict > 0.0 {
            s = s.rate(m(), Fault::TransactionConflict, r(conflict));
        }
        s = s
            .rate(m(), Fault::Throttle, r(throttle))
            .rate(m(), Fault::InternalError, r(internal))
            .rate(m(), Fault::Latency(Duration::from_millis(20)), r(0.02));
        if lost > 0.0 {
            s = s.rate(m(), Fault::LostResponse, r(lost));
        }
        s
    };
    let mut s = Schedule::seeded(seed);
    // A request meets the first plan that matches it: the kinds' plans go first.
    for kind in KINDS {
        s = with_rates(s, &|| kind.matcher(), kind.operation);
        if scale > 0.0 {
            s = s.lead(kind.matcher(), lead(kind));
        }
    }
    for (operation, ..) in RATES {
        s = with_rates(s, &|| Matcher::operation(operation), operation);
    }
    s
}
