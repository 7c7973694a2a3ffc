#!/usr/bin/env bash
# `make chaos CHANGES=N [SUBSCRIPTIONS=K] SEED=S [WAVE=W] [TIMEOUT_MS=T]`: the chaos scenario
# (local::chaos) for K webhook subscriptions (3 when unset) on the local emulator, in waves of WAVE
# changes on fresh stacks, the worker's attempt timeout T ms;
# prints the summary line and writes the JSON report to target/chaos/chaos-<changes>-<seed>.json.
# Fails when the run found a defect.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/venv.sh
changes=${CHANGES:-5000}
subscriptions=${SUBSCRIPTIONS:-3}
seed=${SEED:-1}
wave=${WAVE:-500}
round=${ROUND:-50}
# The worker's attempt timeout (the run's default, 300 ms, when unset).
timeout_args=()
[ -n "${TIMEOUT_MS:-}" ] && timeout_args=(--attempt-timeout-ms "$TIMEOUT_MS")
# A debug build: the emulator, not the handlers, sets the pace (and the test build is reused).
cargo build --quiet -p local --bin chaos
target_dir="${CARGO_TARGET_DIR:-target}"
RUST_LOG="${RUST_LOG:-error,local=info}" scripts/with-emulator.sh "$target_dir/debug/chaos" \
  --changes "$changes" --subscriptions "$subscriptions" --seed "$seed" --wave "$wave" --round "$round" \
  --report "target/chaos/chaos-$changes-$seed.json" "${timeout_args[@]}" "$@"
