#!/usr/bin/env bash
# Creates the project-local Python virtualenvs with the pinned tools: .venv from
# scripts/requirements.txt (the moto emulator, cfn-lint, the SAM CLI, cargo-lambda, zig, actionlint
# and shellcheck) and .venv-checkov from scripts/requirements-checkov.txt (checkov, whose boto3 pin
# conflicts with the SAM CLI's) and .venv-contract from scripts/requirements-contract.txt
# (schemathesis, for the API contract test). `scripts/venv.sh browser` creates .venv-browser from
# scripts/requirements-browser.txt (Playwright and pytest, for the browser tests) instead. Each is
# re-created only when its requirements change.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}

ensure() {
  local venv=$1 requirements=$2
  local stamp=$venv/.requirements.sha256 want
  want=$(sha256sum "$requirements" | cut -d' ' -f1)
  if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  command -v "$python" >/dev/null || { echo "venv: $python not found; install Python 3.10+" >&2; exit 1; }
  echo "venv: installing pinned Python tools into $venv (first run takes a minute)"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  "$venv/bin/python" -m pip install --quiet -r "$requirements"
  echo "$want" > "$stamp"
}

if [ "${1:-}" = browser ]; then
  ensure .venv-browser scripts/requirements-browser.txt
  exit 0
fi
ensure .venv scripts/requirements.txt
ensure .venv-checkov scripts/requirements-checkov.txt
ensure .venv-contract scripts/requirements-contract.txt
