//! `bench --processes DIR[,DIR…] [--changes N] [--runs K]` (`scripts/process-bench.sh`): what the three
//! delivery functions cost as they ship. Their binaries, built in DIR with the release profile,
//! run as processes under Runtime APIs of their own and are handed the event source mappings'
//! batches as JSON ([`Pipeline::in_processes`]); a run of N first-attempt deliveries at fan-out 1
//! counts each process's CPU time (user and system, every thread, from `/proc/<pid>/stat`) from
//! just before its first batch to its last answer, so its start and its idle waits before and
//! after are left out. The runs take turns with the in-process scenario of the same size (each
//! function's handler on a thread and current-thread runtime of its own, that thread's CPU
//! clock) and with the other builds named, and the medians are printed side by side.

use super::{prepare, run, Setup};
use anyhow::{ensure, Result};
use local::pipeline::Pipeline;
use local::receiver::Receiver;
use std::path::Path;
use std::time::Duration;

/// The scenario measured both ways.
const NAME: &str = "first-attempt push, fan-out 1";
/// The functions on a delivery's path, in its order.
const FUNCTIONS: [&str; 3] = ["ingest", "dispatch", "deliver"];
/// Rounds of pumping a process run may take for its deliveries to arrive (the processes keep
/// the real clock, so a batching delay of theirs is waited out, not skipped).
const ROUNDS: usize = 20;

/// Each function's CPU time per delivery in milliseconds, in [`FUNCTIONS`]' order.
type PerDelivery = [f64; 3];

/// One run of `changes` deliveries through the binaries in `dir`.
async fn in_processes(dir: &Path, changes: usize) -> Result<PerDelivery> {
    let p = Pipeline::in_processes(dir).await?;
    let receiver = Receiver::start().await;
    prepare(&p, &receiver, changes, 1, Setup::FirstAttempt).await?;
    let processes = p.processes.as_ref().expect("a pipeline in processes");
    let before = processes.cpu().await?;
    for _ in 0..ROUNDS {
        p.pump().await?;
        if receiver.count() >= changes {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let after = processes.cpu().await?;
    ensure!(
        receiver.count() == changes,
        "{} of {changes} deliveries arrived from the processes",
        receiver.count()
    );
    Ok(std::array::from_fn(|i| {
        per_delivery(after[i].1.saturating_sub(before[i].1), changes)
    }))
}

/// One run of the same scenario in-process (each function's thread clock).
async fn in_process(changes: usize) -> Result<PerDelivery> {
    let s = run(NAME, changes, 1, Setup::FirstAttempt).await?;
    Ok(FUNCTIONS.map(|f| per_delivery(s.function_cpu[f], changes)))
}

fn per_delivery(cpu: Duration, deliveries: usize) -> f64 {
    cpu.as_secs_f64() * 1000.0 / deliveries.max(1) as f64
}

/// The median of each function's figure over `runs`.
fn medians(runs: &[PerDelivery]) -> PerDelivery {
    std::array::from_fn(|i| {
        let mut v: Vec<f64> = runs.iter().map(|r| r[i]).collect();
        v.sort_by(f64::total_cmp);
        match v.len() {
            0 => 0.0,
            n if n % 2 == 1 => v[n / 2],
            n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        }
    })
}

/// Runs the in-process scenario and then the binaries of each of `dirs` (one build each, e.g.
/// two runtime flavours), `runs` times in turn, and prints every run and the medians.
pub async fn compare(dirs: &[&Path], changes: usize, runs: usize) -> Result<()> {
    // The processes run in their binary's directory (as Lambda's task root).
    let dirs = dirs
        .iter()
        .map(std::fs::canonicalize)
        .collect::<std::io::Result<Vec<_>>>()?;
    let mut inside = Vec::new();
    let mut outside: Vec<Vec<PerDelivery>> = vec![Vec::new(); dirs.len()];
    for k in 1..=runs {
        inside.push(in_process(changes).await?);
        println!("run {k}: in-process {}", line(inside.last().unwrap()));
        for (dir, figures) in dirs.iter().zip(&mut outside) {
            figures.push(in_processes(dir, changes).await?);
            println!(
                "run {k}: {} {}",
                dir.display(),
                line(figures.last().unwrap())
            );
        }
    }
    println!(
        "\n{NAME}, {changes} deliveries, CPU ms per delivery, medians of {runs} runs in turn \
         (in-process: each function's thread; then each build's processes, all threads):"
    );
    let mut columns = vec![("in-process".to_string(), medians(&inside))];
    for (dir, figures) in dirs.iter().zip(&outside) {
        columns.push((dir.display().to_string(), medians(figures)));
    }
    for (name, m) in &columns {
        let total: f64 = m.iter().sum();
        println!("  {:<40} {} (total {total:.3})", name, line_of(m));
    }
    Ok(())
}

fn line_of(r: &PerDelivery) -> String {
    FUNCTIONS
        .iter()
        .zip(r)
        .map(|(f, ms)| format!("{f} {ms:.3}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn line(r: &PerDelivery) -> String {
    format!("{} (total {:.3})", line_of(r), r.iter().sum::<f64>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_median_is_the_middle_run_or_the_mean_of_the_middle_two() {
        let runs = [[3.0, 1.0, 2.0], [1.0, 2.0, 9.0], [2.0, 3.0, 1.0]];
        assert_eq!(medians(&runs), [2.0, 2.0, 2.0]);
        assert_eq!(medians(&runs[..2]), [2.0, 1.5, 5.5]);
    }
}
