#!/usr/bin/env bash
# The smoke test of a running stack (scripts/smoke.py says what it checks):
#
#   RHYTHM_OPERATOR_TOKEN=<operator JWT> scripts/smoke.sh --api <ApiUrl output> \
#     [--listen 127.0.0.1:8787 --receiver-url https://<public URL forwarding to it>]
#
# CI runs it after each stage's deploy; `make test` runs it against the local served stack
# (local/tests/it/smoke.rs). Needs only python3.
set -euo pipefail
command -v python3 >/dev/null || { echo "smoke: python3 not found" >&2; exit 1; }
exec python3 "$(dirname "$0")/smoke.py" "$@"
