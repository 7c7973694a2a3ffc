#!/usr/bin/env bash
# Runs a command with the local emulator started (and stopped again afterwards if this script
# started it), with AWS_ENDPOINT_URL and credentials pointing at it.
set -euo pipefail
cd "$(dirname "$0")/.."
started=0
if ! scripts/emulator.sh status >/dev/null 2>&1; then
  scripts/emulator.sh start
  started=1
fi
cleanup() { [ "$started" = 1 ] && scripts/emulator.sh stop >/dev/null || true; }
trap cleanup EXIT
# shellcheck disable=SC1091
source .local/emulator.env
"$@"
