#!/usr/bin/env bash
# `make bench`: the pipeline benchmark on the local emulator (request counts per delivery,
# invocations, throughput, heap per full batch; JSON in target/bench/bench.json, chart in
# docs/benchmarks.png), then the criterion micro-benchmarks of the pure core.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/venv.sh
# The chart's Python (matplotlib), for the bench only: not in scripts/requirements.txt.
stamp=.venv/.requirements-bench.sha256
want=$(sha256sum scripts/requirements-bench.txt | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "bench: installing scripts/requirements-bench.txt into .venv"
  .venv/bin/python -m pip install --quiet --only-binary=:all: -r scripts/requirements-bench.txt
  echo "$want" > "$stamp"
fi
cargo build --quiet --profile bench -p local --bin bench
# Prints the table and writes the same figures as JSON, from which the chart is drawn.
target_dir="${CARGO_TARGET_DIR:-target}"
RUST_LOG="${RUST_LOG:-error}" scripts/with-emulator.sh "$target_dir/release/bench" --json-out target/bench/bench.json "$@"
.venv/bin/python scripts/bench_chart.py target/bench/bench.json docs/benchmarks.png
cargo bench -p shared --bench core -- --noplot
