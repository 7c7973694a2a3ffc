//! The chaos run, small (`local::chaos`; `make chaos` runs it large): 100 changes for three
//! webhook subscriptions through the real handlers, with faulty endpoints, duplicate stream records
//! and messages, workers dying after their claim and seeded SDK faults, walked on the virtual
//! clock until everything is terminal. Every count of defects, read from the tables and the
//! endpoints' own logs, must be zero.

use local::chaos::{lead, run, ChaosConfig};
use local::request_kinds::named;

#[tokio::test]
async fn a_hundred_changes_for_three_subscriptions_survive_every_fault_with_nothing_lost_duplicated_or_stuck(
) {
    let mut config = ChaosConfig::new(100, 14);
    config.round_changes = 25;
    let report = run(&config, |_| {}).await.expect("the chaos run");
    println!("{}", report.summary());
    println!(
        "faults by kind of request: {:#?}",
        report.sdk_faults_by_request
    );
    // Every request the handlers made is of a kind the fault matrix lists, and every kind made
    // met each fault (its lead: throttled and 5xx past the SDK's tries, a lost answer, and
    // conflicts for a transaction).
    assert!(
        report.unlisted_requests.is_empty(),
        "requests of no listed kind: {:#?}",
        report.unlisted_requests
    );
    for name in &report.requests_made {
        let kind = named(name);
        let met = report.sdk_faults_by_request.get(name);
        for fault in lead(kind).into_iter().flatten() {
            let n = met.and_then(|m| m.get(fault.kind())).copied().unwrap_or(0);
            assert!(n > 0, "{name} never met {}: {met:?}", fault.kind());
        }
    }
    for name in [
        "worker.claim",
        "worker.outcome",
        "worker.dead",
        "worker.pause",
        "worker.internal_result",
    ] {
        assert!(report.requests_made.contains(name), "{name} was not made");
    }
    let f = &report.figures;
    let d = &f.defects;
    assert!(f.examples.is_empty(), "defects: {:#?}", f.examples);
    assert_eq!(
        (
            d.lost,
            d.duplicated,
            d.stuck,
            d.lifecycle,
            d.history,
            d.off_schedule
        ),
        (0, 0, 0, 0, 0, 0),
        "{}",
        report.summary()
    );
    assert_eq!(
        (
            d.rollup,
            d.pauses,
            d.notices,
            d.dead_counts,
            d.internal,
            report.signature_failures
        ),
        (0, 0, 0, 0, 0, 0),
        "{}",
        report.summary()
    );
    // The faults really happened: the run is not a quiet one.
    assert_eq!(f.changes, 100);
    assert_eq!(report.signatures_checked, f.requests);
    assert!(
        f.endpoint_faults > 20 && f.requests > f.deliveries,
        "{}",
        report.summary()
    );
    assert!(
        report.sdk_faults.values().sum::<u64>() > 50,
        "{:?}",
        report.sdk_faults
    );
    assert!(report.harness.worker_deaths + report.harness.duplicate_messages > 0);
    // The outage endpoint's subscription paused, the others did not.
    assert_eq!(f.paused_subscriptions, 1);
    assert!(
        f.skipped_paused > 0,
        "changes after the pause are skipped for it"
    );
}
