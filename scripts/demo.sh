#!/usr/bin/env bash
# `make demo`: starts the local emulator (installing the Python tools on first use), runs the demo
# of the delivery pipeline against it, and stops the emulator again.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "demo: cargo not found; install Rust (rustup)" >&2; exit 1; }
scripts/venv.sh
cargo build --quiet -p local --bin demo
RUST_LOG="${RUST_LOG:-error}" scripts/with-emulator.sh "${CARGO_TARGET_DIR:-target}/debug/demo"
