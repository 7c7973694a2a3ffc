#!/usr/bin/env bash
# The browser tests (local/browser/, run by `make test`): installs Debian's headless Chromium
# (scripts/chromium.sh), the pinned Playwright and pytest (.venv-browser) and the pinned axe-core
# the accessibility audit injects (scripts/axe-core.sh), builds the stack
# they drive (local/src/bin/console_stack.rs) and runs them against the local emulator. The
# stack serves only while pytest runs: it stops when pytest closes its standard input.
# Screenshots land in target/browser/console-*.png (UPDATE_SCREENSHOTS=1: the README's
# docs/console-*.png); the Event monitor's figures are printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/chromium.sh
scripts/venv.sh browser
AXE_JS="$(scripts/axe-core.sh)"
export AXE_JS
cargo build --quiet -p local --bin console_stack
export CONSOLE_STACK="${CARGO_TARGET_DIR:-target}/debug/console_stack"
exec scripts/with-emulator.sh .venv-browser/bin/python -m pytest local/browser -p no:cacheprovider "$@"
