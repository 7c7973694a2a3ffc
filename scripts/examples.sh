#!/usr/bin/env bash
# Installs the pinned dependencies of the receiver's guide's examples (examples/), which the
# integration tests run (local/tests/it/receiver_examples.rs): .venv-examples from
# examples/python-receiver/requirements.txt (PyPI), and examples/node-receiver/node_modules by
# `npm ci` from its committed package-lock.json (npm). The pull adapter needs Python's standard
# library only. Each is installed again only when its pins change, so a second run is instant.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}

requirements=examples/python-receiver/requirements.txt
venv=.venv-examples
want=$(sha256sum "$requirements" | cut -d' ' -f1)
if ! [ -x "$venv/bin/python" ] || [ "$(cat "$venv/.requirements.sha256" 2>/dev/null)" != "$want" ]; then
  command -v "$python" >/dev/null || { echo "examples: $python not found; install Python 3.10+" >&2; exit 1; }
  echo "examples: installing the Python receiver's pins into $venv"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
  echo "$want" > "$venv/.requirements.sha256"
fi

node_dir=examples/node-receiver
want=$(sha256sum "$node_dir/package-lock.json" | cut -d' ' -f1)
if [ "$(cat "$node_dir/node_modules/.package-lock.sha256" 2>/dev/null)" != "$want" ]; then
  command -v npm >/dev/null || { echo "examples: npm not found; install Node.js 20 or later (with npm)" >&2; exit 1; }
  echo "examples: installing the Node receiver's pins (npm ci)"
  (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$want" > "$node_dir/node_modules/.package-lock.sha256"
fi
