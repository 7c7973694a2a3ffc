#!/usr/bin/env python3
"""A Rhythm delivery pull adapter: reads its subscriptions' pending changes through the cursor
API, processes each, and acknowledges each page with its `next_cursor`. Python's standard library
only.

Environment: RHYTHM_API_URL (the API's base URL), RHYTHM_INTEGRATION_TOKEN (the `poll`
integration's `rhy_intg_...` token), PAGE_LIMIT (1 to 100, default 100), POLL_SECONDS (default 5).
`--once` reads until nothing is pending and exits; without it the adapter polls forever.

Each processed change is one JSON line on stdout; each acknowledgement is a JSON line too.
"""
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

API = os.environ["RHYTHM_API_URL"].rstrip("/")
TOKEN = os.environ["RHYTHM_INTEGRATION_TOKEN"]
PAGE_LIMIT = int(os.environ.get("PAGE_LIMIT", "100"))
POLL_SECONDS = float(os.environ.get("POLL_SECONDS", "5"))

# delivery_id of every change already processed. Delivery is at least once from the adapter's
# side (a lost acknowledgement, or an operator's redelivery, shows a change again), so the work
# is keyed on it. A real adapter keeps this with the effect of the change.
processed = set()


class Conflict(Exception):
    """A 409: the cursor no longer fits the subscription (stale, or moved on by someone else)."""


def call(method, path, body=None):
    request = urllib.request.Request(
        API + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"authorization": f"Bearer {TOKEN}", "content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)
    except urllib.error.HTTPError as error:
        problem = json.loads(error.read() or b"{}")
        if error.code == 409:
            raise Conflict(problem.get("detail", "conflict")) from None
        raise RuntimeError(f"{method} {path}: {error.code} {problem}") from None


def emit(record):
    print(json.dumps(record), flush=True)


def process(subscription_id, change):
    """The adapter's own work: here, a line on stdout (once per delivery)."""
    if change["delivery_id"] in processed:
        return
    processed.add(change["delivery_id"])
    emit({"subscription_id": subscription_id, "change_id": change["change_id"],
          "delivery_id": change["delivery_id"], "redelivery": change["redelivery"],
          "data": change["payload"]["data"]})


def drain(subscription_id):
    """Reads and acknowledges pages until nothing is pending. Without a cursor a read starts at
    the acknowledged position; a page's `next_cursor` both continues the read and acknowledges
    everything up to the page's end."""
    base = f"/v1/pull/subscriptions/{urllib.parse.quote(subscription_id)}"
    cursor = None
    while True:
        query = {"limit": PAGE_LIMIT} | ({"cursor": cursor} if cursor else {})
        page = call("GET", f"{base}/changes?{urllib.parse.urlencode(query)}")
        for change in page["data"]:
            process(subscription_id, change)
        if page["data"]:
            try:
                ack = call("PUT", f"{base}/cursor", {"cursor": page["next_cursor"]})
            except Conflict as stale:
                # An operator restarted deliveries since this read: read again from the
                # acknowledged position (what was processed is skipped by `process`).
                emit({"subscription_id": subscription_id, "stale_cursor": str(stale)})
                cursor = None
                continue
            emit({"subscription_id": subscription_id,
                  "acknowledged_change_id": ack["acknowledged_change_id"],
                  "delivered": ack["delivered"], "not_covered": ack["not_covered"]})
        if not page["has_more"]:
            return
        cursor = page["next_cursor"]


def main():
    once = "--once" in sys.argv[1:]
    while True:
        subscriptions = call("GET", "/v1/pull/subscriptions?limit=100")["data"]
        for subscription in subscriptions:
            if subscription["status"] == "active":
                drain(subscription["id"])
        if once:
            return
        time.sleep(POLL_SECONDS)


if __name__ == "__main__":
    main()
