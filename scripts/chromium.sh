#!/usr/bin/env bash
# Installs Debian's headless Chromium and its ChromeDriver (packages chromium, chromium-driver)
# for the browser tests, unless /usr/bin/chromium is already there. Runs apt-get directly (the
# machines run as root; there is no sudo). Quiet and idempotent: prints one line when it installs.
set -euo pipefail
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
  exit 0
fi
command -v apt-get >/dev/null || { echo "chromium: apt-get not found; install Debian's chromium package by hand" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "chromium: installing Debian's chromium needs root (apt-get)" >&2; exit 1; }
echo "chromium: installing Debian's chromium and chromium-driver (first run takes a minute)"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium chromium-driver fonts-dejavu-core; } >"$log" 2>&1; then
  echo "chromium: apt-get failed:" >&2
  tail -20 "$log" >&2
  exit 1
fi
echo "chromium: $(/usr/bin/chromium --version 2>/dev/null)"
