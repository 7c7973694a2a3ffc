#!/usr/bin/env bash
# `make bench`: the pipeline benchmark on the local emulator (request counts per delivery,
# invocations, throughput), then the criterion micro-benchmarks of the pure core.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/venv.sh
cargo build --quiet --profile bench -p local --bin bench
RUST_LOG="${RUST_LOG:-error}" scripts/with-emulator.sh target/release/bench "$@"
cargo bench -p shared --bench core -- --noplot
