#!/usr/bin/env bash
# Creates the project-local Python virtualenv (.venv) with the pinned tools of
# scripts/requirements.txt: the moto emulator, cfn-lint, the SAM CLI, cargo-lambda and zig.
# Re-runs only when the requirements change.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv
stamp=$venv/.requirements.sha256
want=$(sha256sum scripts/requirements.txt | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
python=${PYTHON:-python3}
command -v "$python" >/dev/null || { echo "venv: $python not found; install Python 3.10+" >&2; exit 1; }
echo "venv: installing pinned Python tools into $venv (first run takes a minute)"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet -r scripts/requirements.txt
echo "$want" > "$stamp"
