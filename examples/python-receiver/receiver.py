#!/usr/bin/env python3
"""A Rhythm delivery webhook receiver: verifies each request with the `standardwebhooks` library,
processes each delivery once (deduplicated on `webhook-id`) and answers 2xx only once it is done.

Environment: WEBHOOK_SECRET (the integration's `whsec_...` signing secret, required), PORT
(default 8000; 0 picks a free one), HOST (default 127.0.0.1). Prints `listening on <url>` when
ready. `GET /stats` answers what it accepted, refused and recognised as a repeat.
"""
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

MAX_BODY = 1 << 20  # far above any delivery; refuse anything larger unread

webhook = Webhook(os.environ["WEBHOOK_SECRET"])
lock = threading.Lock()
# webhook-id -> the change it carried. A real receiver keeps this in its database, written in the
# same transaction as the effect of the change, and forgets ids after a few days.
processed = {}
counts = {"accepted": 0, "duplicates": 0, "refused": 0}


def process(change):
    """The receiver's own work: here, a line on stdout."""
    print(f"{change['type']} {change['record_type']}/{change['record_id']} "
          f"change {change['change_id']}", flush=True)


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        if length > MAX_BODY:
            return self.answer(413, {"error": "too large"})
        body = self.rfile.read(length)
        try:
            # Verify the exact bytes received, before parsing anything.
            change = webhook.verify(body, dict(self.headers.items()))
        except WebhookVerificationError as error:
            with lock:
                counts["refused"] += 1
            return self.answer(400, {"error": str(error)})
        delivery_id = self.headers["webhook-id"]
        with lock:
            if delivery_id in processed:
                # A repeat (our earlier answer was lost, or an operator resent it): acknowledge
                # again without doing the work twice.
                counts["duplicates"] += 1
                return self.answer(200, {"duplicate": True})
            process(change)
            processed[delivery_id] = change["change_id"]
            counts["accepted"] += 1
        self.answer(200, {"accepted": delivery_id})

    def do_GET(self):
        if self.path != "/stats":
            return self.answer(404, {"error": "not found"})
        with lock:
            self.answer(200, dict(counts, accepted_ids=sorted(processed)))

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass  # keep stdout for the deliveries


def main():
    host = os.environ.get("HOST", "127.0.0.1")
    server = ThreadingHTTPServer((host, int(os.environ.get("PORT", "8000"))), Handler)
    print(f"listening on http://{host}:{server.server_port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
