//! Faults the emulator cannot make, injected at the SDK boundary: an HTTP client between the AWS
//! SDK and the emulator that answers chosen requests itself, as DynamoDB, SQS or SES would under
//! contention or load — a cancelled transaction (`TransactionConflict`), a throttle, an internal
//! error — or forwards them and then loses the response, or delays them.
//!
//! The SDK's own retry policy stays as configured for production: a throttle or a 500 answered
//! here is retried by the SDK exactly as one from AWS would be, so tests see what AWS clients
//! see. Harness only: the functions never link this module.
//!
//! Faults come from counted rules ([`Faults::inject`]: the next n requests of an operation) or
//! from a seeded [`Schedule`] ([`Faults::follow`]): per operation and table or queue, a rate of
//! each fault kind or an explicit sequence, reproducible from its seed.

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_runtime_api::http::{Response, StatusCode};
use aws_smithy_types::body::SdkBody;
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The SDK's sleeps (its retry backoff), shortened `factor` times: the retry policy is the
/// production one (which errors are retried, how many attempts, the backoff sequence); only the
/// real time it waits is compressed, as the virtual clock compresses the delivery schedule. For
/// runs that inject thousands of throttles (the chaos run); tests that time retries leave it.
#[derive(Debug, Clone, Copy)]
pub struct CompressedSleep(pub u32);

impl aws_smithy_async::rt::sleep::AsyncSleep for CompressedSleep {
    fn sleep(&self, duration: Duration) -> aws_smithy_async::rt::sleep::Sleep {
        let factor = self.0.max(1);
        aws_smithy_async::rt::sleep::Sleep::new(tokio::time::sleep(duration / factor))
    }
}

/// What a matching request meets.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// DynamoDB cancels the transaction: another transaction holds one of its items. Nothing is
    /// written.
    TransactionConflict,
    /// DynamoDB (`ProvisionedThroughputExceededException`) or SQS/SES (`ThrottlingException`)
    /// refuses the load. Nothing is written; the SDK retries it.
    Throttle,
    /// The service fails with a 500. Nothing is written; the SDK retries it.
    InternalError,
    /// The request reaches the service and is applied, but its response never arrives: the
    /// caller sees a timeout (and the SDK may send it again).
    LostResponse,
    /// The request is held this long before it is sent.
    Latency(Duration),
    /// Not a fault: the service is not called, and the request is answered as applied after
    /// this long, with an empty JSON body (what a put, or an update that asks for no values, gets
    /// back). It times a handler's own rounds of requests apart from the emulator, which answers
    /// one request at a time.
    AnsweredAfter(Duration),
}

impl Fault {
    /// The fault's kind, without its parameters.
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::TransactionConflict => "TransactionConflict",
            Fault::Throttle => "Throttle",
            Fault::InternalError => "InternalError",
            Fault::LostResponse => "LostResponse",
            Fault::Latency(_) => "Latency",
            Fault::AnsweredAfter(_) => "AnsweredAfter",
        }
    }
}

/// Which requests a rule applies to.
#[derive(Debug, Clone, Default)]
pub struct Matcher {
    /// The operation, e.g. `TransactWriteItems`, `UpdateItem`, `SendMessageBatch`.
    pub operation: String,
    /// A text the request body must contain (a table or queue name, an attribute).
    pub body_contains: Option<String>,
}

impl Matcher {
    /// Every request of `operation` (e.g. `UpdateItem`).
    pub fn operation(operation: &str) -> Self {
        Self {
            operation: operation.into(),
            ..Default::default()
        }
    }

    /// Only the requests whose body names `target` (a table or queue name: DynamoDB bodies carry
    /// `"TableName"`, SQS bodies the `QueueUrl`).
    pub fn on(mut self, target: &str) -> Self {
        self.body_contains = Some(target.into());
        self
    }

    /// Whether a request of `operation` with `body` is one of these.
    pub fn matches(&self, operation: &str, body: &[u8]) -> bool {
        self.operation == operation && self.body_contains.iter().all(|text| contains(body, text))
    }

    /// A stable name for the matcher, so a plan's draws do not depend on the other plans.
    pub fn key(&self) -> String {
        format!(
            "{}@{}",
            self.operation,
            self.body_contains.as_deref().unwrap_or("*")
        )
    }
}

/// Whether `body` contains `text` (an empty text: never).
fn contains(body: &[u8], text: &str) -> bool {
    body.windows(text.len().max(1))
        .any(|w| w == text.as_bytes())
}

/// How a plan picks the fault of its n-th matching request.
#[derive(Debug, Clone)]
pub enum Draw {
    /// Each request independently meets each fault with its probability (the rates sum to at
    /// most 1; the rest go through untouched).
    Rates(Vec<(Fault, f64)>),
    /// The n-th matching request meets the n-th entry (`None`: untouched); past the end, none.
    Sequence(Vec<Option<Fault>>),
}

/// One operation (and table or queue) and how its requests meet faults: the first ones `lead`,
/// the rest `draw`.
#[derive(Debug, Clone)]
pub struct Plan {
    pub matcher: Matcher,
    pub lead: Vec<Option<Fault>>,
    pub draw: Draw,
}

/// A reproducible fault schedule: for each plan, the fault of the n-th matching request is a
/// function of the seed, the plan's matcher and n only. So one seed gives the same schedule
/// every run; under concurrency only which request comes n-th may differ.
#[derive(Debug, Clone)]
pub struct Schedule {
    seed: u64,
    plans: Vec<Plan>,
}

impl Schedule {
    pub fn seeded(seed: u64) -> Self {
        Self {
            seed,
            plans: Vec::new(),
        }
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Requests `matcher` matches meet `fault` with probability `rate` (0..=1). Several calls
    /// for one matcher add up into one plan.
    pub fn rate(mut self, matcher: Matcher, fault: Fault, rate: f64) -> Self {
        assert!((0.0..=1.0).contains(&rate), "a rate is a probability");
        let key = matcher.key();
        match self.plans.iter_mut().find(|p| p.matcher.key() == key) {
            Some(Plan {
                draw: Draw::Rates(rates),
                ..
            }) => rates.push((fault, rate)),
            _ => self.plans.push(Plan {
                matcher,
                lead: Vec::new(),
                draw: Draw::Rates(vec![(fault, rate)]),
            }),
        }
        self
    }

    /// The matching requests meet `sequence` in order, then nothing.
    pub fn sequence(mut self, matcher: Matcher, sequence: Vec<Option<Fault>>) -> Self {
        self.plans.push(Plan {
            matcher,
            lead: Vec::new(),
            draw: Draw::Sequence(sequence),
        });
        self
    }

    /// The first requests `matcher` matches meet `lead` in order, before the plan's rates (or
    /// sequence) take over (e.g. so that every kind of request meets each fault at least once).
    /// A plan of its own (no rates) when none matches on `matcher` yet.
    pub fn lead(mut self, matcher: Matcher, lead: Vec<Option<Fault>>) -> Self {
        let key = matcher.key();
        match self.plans.iter_mut().find(|p| p.matcher.key() == key) {
            Some(plan) => plan.lead = lead,
            None => self.plans.push(Plan {
                matcher,
                lead,
                draw: Draw::Rates(Vec::new()),
            }),
        }
        self
    }

    pub fn plans(&self) -> &[Plan] {
        &self.plans
    }

    /// The fault the n-th (from 0) request matching plan `plan` meets.
    pub fn fault_of(&self, plan: usize, n: u64) -> Option<Fault> {
        let p = &self.plans[plan];
        if let Some(lead) = p.lead.get(n as usize) {
            return lead.clone();
        }
        let n = n - p.lead.len() as u64;
        match &p.draw {
            Draw::Sequence(sequence) => sequence.get(n as usize).cloned().flatten(),
            Draw::Rates(rates) => {
                let mut rng = StdRng::seed_from_u64(mix(self.seed, &p.matcher.key(), n));
                let u: f64 = rng.gen();
                let mut edge = 0.0;
                rates.iter().find_map(|(fault, rate)| {
                    edge += rate;
                    (u < edge).then(|| fault.clone())
                })
            }
        }
    }

    /// The first `n` faults of plan `plan`, as [`Schedule::fault_of`] gives them.
    pub fn preview(&self, plan: usize, n: u64) -> Vec<Option<Fault>> {
        (0..n).map(|i| self.fault_of(plan, i)).collect()
    }
}

/// The seed of one draw: the schedule's seed, the plan's name (FNV-1a) and the request's rank,
/// mixed (splitmix64) so neighbouring ranks draw unrelated values.
fn mix(seed: u64, key: &str, n: u64) -> u64 {
    let name = key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let mut z = seed ^ name.rotate_left(17) ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A schedule being followed: how many requests each plan has matched so far.
#[derive(Debug)]
struct Following {
    schedule: Schedule,
    seen: Vec<u64>,
}

#[derive(Debug)]
struct Rule {
    matcher: Matcher,
    /// Further texts the body must contain (one item's key, among the requests of a kind).
    also: Vec<String>,
    fault: Fault,
    /// Matching requests still to meet the fault.
    remaining: u32,
}

/// The faults still to be injected, and what was injected. Cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct Faults {
    rules: Arc<Mutex<Vec<Rule>>>,
    schedule: Arc<Mutex<Option<Following>>>,
    injected: Arc<Mutex<Vec<(String, Fault)>>>,
    /// Faults the schedule's plans injected: (plan's matcher, fault kind) → count.
    by_plan: Arc<Mutex<std::collections::BTreeMap<(String, &'static str), u64>>>,
    counters: Arc<Mutex<Vec<(Matcher, Counted)>>>,
    /// The kinds of request seen (while recording).
    pub kinds: KindLog,
}

/// Kinds of request by signature: the operation and one body of the kind.
pub type Seen = std::collections::BTreeMap<String, (String, Vec<u8>)>;

/// A request's signature: what tells its kind apart (`request_kinds::signature`).
pub type Signature = fn(&str, &[u8]) -> String;

/// The kinds of request seen while recording (shared: clones record together).
#[derive(Debug, Clone, Default)]
pub struct KindLog(Arc<Mutex<Option<(Signature, Seen)>>>);

impl KindLog {
    /// Records from now on, each request under its `signature`.
    pub fn start(&self, signature: Signature) {
        *self.0.lock().unwrap() = Some((signature, Seen::new()));
    }

    fn note(&self, operation: &str, body: &[u8]) {
        if let Some((signature, seen)) = self.0.lock().unwrap().as_mut() {
            seen.entry(signature(operation, body))
                .or_insert_with(|| (operation.to_string(), body.to_vec()));
        }
    }

    /// The kinds seen since [`KindLog::start`].
    pub fn seen(&self) -> Seen {
        let log = self.0.lock().unwrap();
        log.as_ref()
            .map(|(_, seen)| seen.clone())
            .unwrap_or_default()
    }
}

/// How many requests a [`Faults::count_matching`] matcher has seen (shared: clones count
/// together).
#[derive(Debug, Clone, Default)]
pub struct Counted(Arc<std::sync::atomic::AtomicU64>);

impl Counted {
    pub fn get(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Faults {
    pub fn new() -> Self {
        Self::default()
    }

    /// The next `times` requests of `operation` meet `fault`.
    pub fn inject(&self, operation: &str, fault: Fault, times: u32) {
        self.inject_matching(Matcher::operation(operation), fault, times);
    }

    /// The next `times` requests that `matcher` matches meet `fault`.
    pub fn inject_matching(&self, matcher: Matcher, fault: Fault, times: u32) {
        self.inject_narrowed(matcher, &[], fault, times);
    }

    /// The next `times` requests that `matcher` matches and whose body also contains every text
    /// of `also` (e.g. one item's id) meet `fault`.
    pub fn inject_narrowed(&self, matcher: Matcher, also: &[&str], fault: Fault, times: u32) {
        self.rules.lock().unwrap().push(Rule {
            matcher,
            also: also.iter().map(|t| t.to_string()).collect(),
            fault,
            remaining: times,
        });
    }

    /// Counts, from now on, the requests `matcher` matches, whatever they meet (a test's count of
    /// how often something is read or written, e.g. one table's partition).
    pub fn count_matching(&self, matcher: Matcher) -> Counted {
        let counted = Counted::default();
        self.counters
            .lock()
            .unwrap()
            .push((matcher, counted.clone()));
        counted
    }

    /// The faults injected so far: (operation, fault), in order.
    pub fn injected(&self) -> Vec<(String, Fault)> {
        self.injected.lock().unwrap().clone()
    }

    /// The [`Faults::inject`] rules whose faults have not all met a request yet: the matcher,
    /// the fault and how many are left.
    pub fn pending(&self) -> Vec<String> {
        let rules = self.rules.lock().unwrap();
        rules
            .iter()
            .map(|r| {
                let (key, fault) = (r.matcher.key(), r.fault.kind());
                format!("{key}&{} {fault} x{}", r.also.join("&"), r.remaining)
            })
            .collect()
    }

    /// Drops every rule not yet used up, and the schedule.
    pub fn clear(&self) {
        self.rules.lock().unwrap().clear();
        *self.schedule.lock().unwrap() = None;
    }

    /// Requests meet `schedule` from now on (after any rule of [`Faults::inject`], which goes
    /// first). A request meets the first plan that matches it.
    pub fn follow(&self, schedule: Schedule) {
        let seen = vec![0; schedule.plans.len()];
        *self.schedule.lock().unwrap() = Some(Following { schedule, seen });
    }

    /// How many faults of each kind were injected so far, by kind name (`TransactionConflict`,
    /// `Throttle`, `InternalError`, `LostResponse`, `Latency`).
    pub fn injected_by_kind(&self) -> std::collections::BTreeMap<&'static str, u64> {
        let mut counts = std::collections::BTreeMap::new();
        for (_, fault) in self.injected.lock().unwrap().iter() {
            *counts.entry(fault.kind()).or_default() += 1;
        }
        counts
    }

    /// The fault the request meets, if any (and uses one of its rule's count, or one rank of
    /// the schedule's plan).
    fn take(&self, operation: &str, body: &[u8]) -> Option<Fault> {
        self.kinds.note(operation, body);
        for (matcher, counted) in self.counters.lock().unwrap().iter() {
            if matcher.matches(operation, body) {
                counted.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let fault = self
            .take_rule(operation, body)
            .or_else(|| self.take_scheduled(operation, body))?;
        self.injected
            .lock()
            .unwrap()
            .push((operation.to_string(), fault.clone()));
        Some(fault)
    }

    fn take_rule(&self, operation: &str, body: &[u8]) -> Option<Fault> {
        let mut rules = self.rules.lock().unwrap();
        let rule = rules.iter_mut().find(|r| {
            r.remaining > 0
                && r.matcher.matches(operation, body)
                && r.also.iter().all(|text| contains(body, text))
        })?;
        rule.remaining -= 1;
        let fault = rule.fault.clone();
        rules.retain(|r| r.remaining > 0);
        Some(fault)
    }

    fn take_scheduled(&self, operation: &str, body: &[u8]) -> Option<Fault> {
        let mut following = self.schedule.lock().unwrap();
        let Following { schedule, seen } = following.as_mut()?;
        let plan = schedule
            .plans
            .iter()
            .position(|p| p.matcher.matches(operation, body))?;
        let n = seen[plan];
        seen[plan] += 1;
        let fault = schedule.fault_of(plan, n)?;
        let key = (schedule.plans[plan].matcher.key(), fault.kind());
        *self.by_plan.lock().unwrap().entry(key).or_default() += 1;
        Some(fault)
    }

    /// The faults the followed schedules injected, by plan (its matcher's [`Matcher::key`]) and
    /// fault kind.
    pub fn injected_by_plan(&self) -> std::collections::BTreeMap<(String, &'static str), u64> {
        self.by_plan.lock().unwrap().clone()
    }

    /// An HTTP client that injects these faults in front of `inner` (the SDK's own client).
    pub fn client(&self, inner: SharedHttpClient) -> SharedHttpClient {
        SharedHttpClient::new(FaultyClient {
            inner,
            faults: self.clone(),
        })
    }
}

#[derive(Debug)]
struct FaultyClient {
    inner: SharedHttpClient,
    faults: Faults,
}

impl HttpClient for FaultyClient {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(FaultyConnector {
            inner: self.inner.http_connector(settings, components),
            faults: self.faults.clone(),
        })
    }
}

#[derive(Debug)]
struct FaultyConnector {
    inner: SharedHttpConnector,
    faults: Faults,
}

/// The operation a request names: DynamoDB, SQS and KMS (JSON protocols) in `X-Amz-Target`
/// (`DynamoDB_20120810.UpdateItem`, `AmazonSQS.SendMessageBatch`, `TrentService.Decrypt`); SES v2
/// (REST) by its path.
fn operation_of(request: &HttpRequest) -> String {
    if let Some(target) = request.headers().get("x-amz-target") {
        return target.rsplit('.').next().unwrap_or(target).to_string();
    }
    let uri = request.uri();
    if uri.contains("/v2/email/outbound-emails") {
        return "SendEmail".into();
    }
    uri.to_string()
}

/// A service's JSON error answer, as the AWS JSON protocols spell it.
fn error_response(status: u16, body: serde_json::Value) -> Response {
    let mut response = Response::new(
        StatusCode::try_from(status).expect("a valid status"),
        SdkBody::from(body.to_string()),
    );
    response
        .headers_mut()
        .insert("content-type", "application/x-amz-json-1.0");
    response
}

/// KMS's operations (the signing secrets' data keys): its errors have their own names and its
/// protocol is JSON 1.1.
const KMS_OPERATIONS: [&str; 3] = ["Decrypt", "GenerateDataKey", "Encrypt"];

fn kms_answer(fault: &Fault) -> Response {
    let (status, error) = match fault {
        Fault::Throttle => (400, "ThrottlingException"),
        _ => (500, "KMSInternalException"),
    };
    let mut response = error_response(
        status,
        serde_json::json!({"__type": error, "message": "injected KMS fault"}),
    );
    response
        .headers_mut()
        .insert("content-type", "application/x-amz-json-1.1");
    response
}

fn answer(fault: &Fault, operation: &str) -> Response {
    if KMS_OPERATIONS.contains(&operation) {
        return kms_answer(fault);
    }
    match fault {
        Fault::TransactionConflict => error_response(
            400,
            serde_json::json!({
                "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
                "message": "Transaction cancelled, please refer cancellation reasons for specific reasons [TransactionConflict]",
                "CancellationReasons": [
                    {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"},
                    {"Code": "None"}
                ]
            }),
        ),
        Fault::Throttle
            if operation.ends_with("Item")
                || operation.contains("Items")
                || operation == "Query" =>
        {
            error_response(
                400,
                serde_json::json!({
                    "__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
                    "message": "The level of configured provisioned throughput for the table was exceeded."
                }),
            )
        }
        Fault::Throttle => error_response(
            400,
            serde_json::json!({"__type": "ThrottlingException", "message": "Rate exceeded"}),
        ),
        _ => error_response(
            500,
            serde_json::json!({
                "__type": "com.amazonaws.dynamodb.v20120810#InternalServerError",
                "message": "Internal server error"
            }),
        ),
    }
}

impl HttpConnector for FaultyConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let operation = operation_of(&request);
        let body = request.body().bytes().unwrap_or_default();
        let fault = self.faults.take(&operation, body);
        let inner = self.inner.clone();
        match fault {
            None => inner.call(request),
            Some(Fault::Latency(wait)) => HttpConnectorFuture::new(async move {
                tokio::time::sleep(wait).await;
                inner.call(request).await
            }),
            Some(Fault::AnsweredAfter(wait)) => HttpConnectorFuture::new(async move {
                tokio::time::sleep(wait).await;
                let mut applied =
                    Response::new(StatusCode::try_from(200).expect("200"), SdkBody::from("{}"));
                applied
                    .headers_mut()
                    .insert("content-type", "application/x-amz-json-1.0");
                Ok(applied)
            }),
            Some(Fault::LostResponse) => HttpConnectorFuture::new(async move {
                // Applied by the service; the answer is lost on the way back.
                let _ = inner.call(request).await;
                Err(ConnectorError::timeout(
                    "injected fault: the response was lost after the request was applied".into(),
                ))
            }),
            Some(fault) => {
                let response = answer(&fault, &operation);
                HttpConnectorFuture::ready(Ok(response))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(seed: u64) -> Schedule {
        Schedule::seeded(seed)
            .rate(
                Matcher::operation("TransactWriteItems").on("deliveries"),
                Fault::TransactionConflict,
                0.2,
            )
            .rate(
                Matcher::operation("TransactWriteItems").on("deliveries"),
                Fault::LostResponse,
                0.1,
            )
            .rate(Matcher::operation("UpdateItem"), Fault::Throttle, 0.3)
    }

    #[test]
    fn one_seed_reproduces_its_schedule_and_another_seed_draws_another() {
        let (a, b, other) = (schedule(7), schedule(7), schedule(8));
        for plan in 0..a.plans().len() {
            assert_eq!(a.preview(plan, 500), b.preview(plan, 500));
        }
        assert_ne!(a.preview(0, 500), other.preview(0, 500));
        assert_eq!(a.plans().len(), 2, "rates of one matcher are one plan");
    }

    #[test]
    fn a_plan_draws_each_fault_near_its_rate_and_leaves_the_rest_untouched() {
        let s = schedule(42);
        let drawn = s.preview(0, 10_000);
        let count = |kind: &str| {
            drawn
                .iter()
                .filter(|f| f.as_ref().is_some_and(|f| f.kind() == kind))
                .count()
        };
        assert!((1_800..2_200).contains(&count("TransactionConflict")));
        assert!((850..1_150).contains(&count("LostResponse")));
        assert!((6_700..7_300).contains(&drawn.iter().filter(|f| f.is_none()).count()));
    }

    #[test]
    fn a_plans_draws_do_not_shift_when_another_plan_is_added_before_it() {
        let alone =
            Schedule::seeded(3).rate(Matcher::operation("UpdateItem"), Fault::Throttle, 0.3);
        let after = Schedule::seeded(3)
            .rate(Matcher::operation("PutItem"), Fault::InternalError, 0.5)
            .rate(Matcher::operation("UpdateItem"), Fault::Throttle, 0.3);
        assert_eq!(alone.preview(0, 300), after.preview(1, 300));
    }

    #[test]
    fn followed_requests_meet_the_schedule_in_rank_order_per_plan() {
        let faults = Faults::new();
        let s = schedule(11);
        let expected = s.preview(1, 50);
        faults.follow(s);
        let met: Vec<_> = (0..50)
            .map(|_| {
                // A request of another plan in between does not move this plan's rank.
                faults.take("TransactWriteItems", br#"{"TableName":"p-deliveries"}"#);
                faults.take("UpdateItem", br#"{"TableName":"p-deliveries"}"#)
            })
            .collect();
        assert_eq!(met, expected);
        assert!(faults.take("GetItem", b"{}").is_none(), "no plan, no fault");
    }

    #[test]
    fn a_sequence_plan_gives_its_entries_in_order_then_nothing() {
        let faults = Faults::new();
        faults.follow(Schedule::seeded(0).sequence(
            Matcher::operation("SendMessageBatch").on("work"),
            vec![None, Some(Fault::Throttle), Some(Fault::LostResponse)],
        ));
        let body = br#"{"QueueUrl":"http://q/p-work"}"#;
        let met: Vec<_> = (0..5)
            .map(|_| faults.take("SendMessageBatch", body))
            .collect();
        assert_eq!(
            met,
            [
                None,
                Some(Fault::Throttle),
                Some(Fault::LostResponse),
                None,
                None
            ]
        );
        assert_eq!(faults.injected_by_kind().len(), 2);
        assert!(
            faults.take("SendMessageBatch", b"{}").is_none(),
            "another queue"
        );
    }

    #[test]
    fn a_plans_lead_comes_first_then_its_rates_draw_as_they_would_alone() {
        let m = || Matcher::operation("UpdateItem").on("lease");
        let rates = Schedule::seeded(5).rate(m(), Fault::Throttle, 0.3);
        let led = rates
            .clone()
            .lead(m(), vec![Some(Fault::LostResponse), None]);
        assert_eq!(led.plans().len(), 1, "the lead joins the matcher's plan");
        let drawn = led.preview(0, 50);
        assert_eq!(drawn[..2], [Some(Fault::LostResponse), None]);
        assert_eq!(drawn[2..], rates.preview(0, 48)[..]);
        let faults = Faults::new();
        faults.follow(led);
        faults.take("UpdateItem", b"lease");
        let by_plan = faults.injected_by_plan();
        assert_eq!(by_plan[&(m().key(), "LostResponse")], 1);
    }

    #[test]
    fn a_counted_rule_goes_before_the_schedule() {
        let faults = Faults::new();
        faults.follow(
            Schedule::seeded(0)
                .sequence(Matcher::operation("PutItem"), vec![Some(Fault::Throttle)]),
        );
        faults.inject("PutItem", Fault::InternalError, 1);
        assert_eq!(faults.take("PutItem", b""), Some(Fault::InternalError));
        assert_eq!(faults.take("PutItem", b""), Some(Fault::Throttle));
        assert_eq!(faults.take("PutItem", b""), None);
    }
}
