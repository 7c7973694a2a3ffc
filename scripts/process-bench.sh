#!/usr/bin/env bash
# `make bench-processes [CHANGES=N] [RUNS=K]`: the delivery functions as they ship. Builds the
# ingest, dispatch and deliver binaries with the release profile and the bench with the bench
# profile, then runs K alternating pairs (N first-attempt deliveries in-process, then through the
# binaries as processes under Runtime APIs of their own) and prints each function's CPU per
# delivery both ways, medians of the K runs (`local/src/bin/bench/processes.rs`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/venv.sh
cargo build --quiet --release -p ingest -p dispatch -p deliver
cargo build --quiet --profile bench -p local --bin bench
target_dir="${CARGO_TARGET_DIR:-target}"
RUST_LOG="${RUST_LOG:-error}" scripts/with-emulator.sh "$target_dir/release/bench" \
  --processes "$target_dir/release" --changes "${CHANGES:-2000}" --runs "${RUNS:-3}"
