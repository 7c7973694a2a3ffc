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
# The command runs as a child with its standard input and the default signal dispositions (a
# background child would otherwise ignore SIGINT); SIGINT and SIGTERM sent to this script are
# passed on to it, and the emulator is stopped once it has ended, however it ends.
( trap - INT QUIT; exec "$@" ) <&0 &
child=$!
trap 'kill -INT "$child" 2>/dev/null || true' INT
trap 'kill -TERM "$child" 2>/dev/null || true' TERM
status=0
while :; do
  wait "$child" && status=0 || status=$?
  kill -0 "$child" 2>/dev/null || break
done
exit "$status"
