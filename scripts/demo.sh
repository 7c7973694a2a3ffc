#!/usr/bin/env bash
# `make demo`: starts the local emulator (installing the Python tools on first use), runs the demo
# of the delivery pipeline against it, then serves the API and the web console with the demo's
# data (it prints a `console:` and a `portal:` login link) until interrupted (Ctrl-C, SIGTERM),
# and stops the emulator. `DEMO_EXIT=1 make demo` ends after the story instead.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "demo: cargo not found; install Rust (rustup)" >&2; exit 1; }
scripts/venv.sh
cargo build --quiet -p local --bin demo
# exec: a SIGTERM to this script (make passes its own on) reaches with-emulator.sh, which passes
# it on to the demo and then stops the emulator.
RUST_LOG="${RUST_LOG:-error}" exec scripts/with-emulator.sh "${CARGO_TARGET_DIR:-target}/debug/demo"
