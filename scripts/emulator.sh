#!/usr/bin/env bash
# Starts, stops and reports on the local AWS emulator (moto, serialised by scripts/emulator.py: DynamoDB, DynamoDB Streams,
# SQS, SES) on a free loopback port. The endpoint is written to .local/emulator.env so that tests,
# the demo and the functions reach it through AWS_ENDPOINT_URL and nothing else.
#   scripts/emulator.sh start | stop | status | env
set -euo pipefail
cd "$(dirname "$0")/.."
state=.local
pidfile=$state/emulator.pid
envfile=$state/emulator.env
log=$state/emulator.log
mkdir -p "$state"

running() { [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }
endpoint() { sed -n 's/^export AWS_ENDPOINT_URL=//p' "$envfile" 2>/dev/null; }
answers() { curl -fsS -o /dev/null --max-time 2 "$1/moto-api/" 2>/dev/null; }

case "${1:-}" in
  start)
    if running && answers "$(endpoint)"; then
      echo "emulator: already running at $(endpoint) (pid $(cat "$pidfile"))"
      exit 0
    fi
    scripts/venv.sh
    port=$(.venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    url="http://127.0.0.1:$port"
    # setsid: the server outlives this script and is stopped by its pid (and process group).
    setsid .venv/bin/python scripts/emulator.py 127.0.0.1 "$port" >"$log" 2>&1 < /dev/null &
    echo $! > "$pidfile"
    for _ in $(seq 1 100); do
      if answers "$url"; then
        cat > "$envfile" <<ENV
export AWS_ENDPOINT_URL=$url
export AWS_REGION=us-east-1
export AWS_ACCESS_KEY_ID=local
export AWS_SECRET_ACCESS_KEY=local
ENV
        echo "emulator: moto server answering at $url (pid $(cat "$pidfile"), log $log)"
        exit 0
      fi
      running || { echo "emulator: moto server exited; see $log" >&2; tail -20 "$log" >&2; exit 1; }
      sleep 0.2
    done
    echo "emulator: moto server did not answer at $url within 20 s; see $log" >&2
    exit 1
    ;;
  stop)
    if running; then
      pid=$(cat "$pidfile")
      kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      echo "emulator: stopped (pid $pid)"
    fi
    rm -f "$pidfile" "$envfile"
    ;;
  status)
    if running && answers "$(endpoint)"; then echo "emulator: running at $(endpoint)"; else echo "emulator: not running"; exit 1; fi
    ;;
  env)
    cat "$envfile"
    ;;
  *)
    echo "usage: scripts/emulator.sh start|stop|status|env" >&2
    exit 2
    ;;
esac
