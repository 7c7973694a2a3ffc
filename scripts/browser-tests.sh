#!/usr/bin/env bash
# The browser tests (local/browser/, run by `make test`): installs Debian's headless Chromium
# (scripts/chromium.sh) and the pinned Playwright and pytest (.venv-browser), builds the stack
# they drive (local/src/bin/console_stack.rs) and runs them against the local emulator. The
# stack serves only while pytest runs: it stops when pytest closes its standard input.
# Screenshots land in docs/console-*.png; the Event monitor's figures are printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/chromium.sh
scripts/venv.sh browser
cargo build --quiet -p local --bin console_stack
export CONSOLE_STACK="${CARGO_TARGET_DIR:-target}/debug/console_stack"
exec scripts/with-emulator.sh .venv-browser/bin/python -m pytest local/browser -p no:cacheprovider "$@"
