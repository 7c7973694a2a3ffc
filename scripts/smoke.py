"""The smoke test of a running stack (scripts/smoke.sh runs it; docs/deploy.md, "Deploying by hand", says when).

Given the stack's API URL and an operator credential, it checks the path a customer's first
integration takes, end to end, and removes what it made:

 1. `GET /health` answers 200 `{"status": "ok"}`;
 2. an operator creates an account (its first account token comes back);
 3. the account creates a webhook integration pointed at a receiver this test runs, and a
    subscription of it;
 4. a test event is sent to the subscription and this test waits for it at the receiver (it may
    be sent while the API answers or afterwards, so the receiver is polled; one that does not
    arrive is sent again, up to three times in all), then checks its
    Standard Webhooks signature with the integration's signing secret, and the `webhook-id` the
    API reported;
 5. the account's audit history shows the account's creation and the test event's send;
 6. cleanup, also after a failure: the subscription and the integration are deleted (and read
    back as 404), then the account (also when an earlier step or deletion failed): it then reads
    as 404, its account token gets 401, and its audit history records the deletion.

The receiver listens on `--listen` (default: a free loopback port) and integrations are pointed
at `--receiver-url` (default: that loopback address). Against a deployed stack the receiver must
be reachable from AWS: pass the public HTTPS URL that forwards to the listener (a tunnel, or a
host with a public address), e.g.
`--listen 127.0.0.1:8787 --receiver-url https://hook.example.net/smoke`.

Only the Python standard library is used, so it runs on any machine with python3. The operator
credential is read from RHYTHM_OPERATOR_TOKEN (a JWT of the stack's identity provider carrying
the operator scope; the local stack's static token), never from the command line, and no token or
secret is printed. Exit status 0 when every step passed, 1 otherwise.
"""

import argparse
import base64
import hashlib
import hmac
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TEST_EVENT_TYPE = "rhythm.test"
# Test events sent at most, when one does not arrive (the API allows ten a minute per account).
SENDS = 3
# A signature older or newer than this is refused, as a Standard Webhooks receiver would.
TIMESTAMP_TOLERANCE_S = 300


class Failed(Exception):
    pass


class Api:
    def __init__(self, base: str, timeout: float):
        self.base = base.rstrip("/")
        self.timeout = timeout

    def call(self, method: str, path: str, token: str | None = None, body=None):
        """(status, parsed JSON body or None)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as r:
                status, raw = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        except (urllib.error.URLError, OSError) as e:
            raise Failed(f"{method} {path}: no answer ({e})") from e
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        return status, parsed

    def expect(self, want: int, method: str, path: str, token=None, body=None):
        status, parsed = self.call(method, path, token, body)
        if status != want:
            detail = parsed.get("detail") if isinstance(parsed, dict) else None
            raise Failed(f"{method} {path}: {status}, expected {want}" + (f" ({detail})" if detail else ""))
        return parsed


class Receiver:
    """An HTTP endpoint that answers 200 and keeps what it was sent."""

    def __init__(self, listen: str):
        host, _, port = listen.rpartition(":")
        self.received: list[dict] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                with receiver.lock:
                    receiver.received.append(
                        {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body}
                    )
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer((host or "127.0.0.1", int(port or 0)), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def loopback_url(self, path: str) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}{path}"

    def wait_for(self, path: str, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for r in self.received:
                    if r["path"] == path:
                        return r
            time.sleep(0.2)
        raise Failed(f"no request reached the receiver's {path} within {timeout:.0f} s")

    def stop(self):
        self.server.shutdown()


def verify_signature(secret: str, headers: dict, body: bytes, now: float) -> None:
    """Standard Webhooks: `v1,` base64(HMAC-SHA256(key, "{id}.{timestamp}.{body}")), one of the
    space-separated signatures; the key is the secret's base64 after `whsec_`."""
    msg_id, stamp, signatures = (headers.get(h) for h in ("webhook-id", "webhook-timestamp", "webhook-signature"))
    if not (msg_id and stamp and signatures):
        raise Failed("the test event lacks webhook-id, webhook-timestamp or webhook-signature")
    if abs(now - int(stamp)) > TIMESTAMP_TOLERANCE_S:
        raise Failed(f"the test event's webhook-timestamp {stamp} is not within {TIMESTAMP_TOLERANCE_S} s of now")
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = msg_id.encode() + b"." + stamp.encode() + b"." + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    offered = [s.split(",", 1)[1] for s in signatures.split() if s.startswith("v1,")]
    if not any(hmac.compare_digest(expected, s) for s in offered):
        raise Failed("the test event's signature does not verify with the integration's signing secret")


class Smoke:
    def __init__(self, args, operator_token: str):
        self.api = Api(args.api, args.http_timeout)
        self.operator = operator_token
        self.args = args
        self.passed = 0
        self.made: dict = {}

    def ok(self, what: str):
        self.passed += 1
        print(f"ok {self.passed} - {what}", flush=True)

    def run(self, receiver: Receiver):
        api, args = self.api, self.args
        health = api.expect(200, "GET", "/health")
        if health != {"status": "ok"}:
            raise Failed(f"/health answered {health}")
        self.ok("GET /health answers 200 {status: ok}")

        name = time.strftime("smoke test %Y-%m-%dT%H:%M:%SZ", time.gmtime())
        created = api.expect(
            201, "POST", "/operator/accounts", self.operator, {"name": name, "reason": "smoke test"}
        )
        account_id, token = created["account"]["id"], created["token"]
        self.made["account"] = (account_id, token)
        self.ok(f"operator created account {account_id}")

        path = f"/smoke/{uuid.uuid4().hex}"
        url = (args.receiver_url.rstrip("/") + path) if args.receiver_url else receiver.loopback_url(path)
        integration = api.expect(
            201,
            "POST",
            "/v1/integrations",
            token,
            {"name": "Smoke receiver", "method": "webhook", "webhook_url": url, "event_access_accepted": True},
        )
        self.made["integration"] = integration["id"]
        secret = integration.get("signing_secret") or ""
        if not secret.startswith("whsec_"):
            raise Failed("the webhook integration came back without its signing secret")
        subscription = api.expect(
            201,
            "POST",
            "/v1/subscriptions",
            token,
            {"integration_id": integration["id"], "record_types": ["*"], "fields": []},
        )
        self.made["subscription"] = subscription["id"]
        self.ok(f"webhook integration {integration['id']} and subscription {subscription['id']} created")

        # A new public receiver URL (a tunnel just opened) may not answer yet: a test event
        # that did not arrive is sent again, a few times.
        got, message_ids = None, set()
        for attempt in range(1, SENDS + 1):
            status, sent = api.call("POST", f"/v1/subscriptions/{subscription['id']}/test-event", token)
            if status not in (200, 202):
                raise Failed(f"POST test-event: {status} ({(sent or {}).get('detail')})")
            if attempt == 1:
                self.ok(f"test event requested ({status})")
            if (sent or {}).get("message_id"):
                message_ids.add(sent["message_id"])
            if status == 202:
                # Queued: the delivery function sends it; its outcome is read back.
                sent = self.test_event_outcome(api, token, subscription["id"], sent, args.wait / SENDS)
            if sent.get("status", "sent") == "sent" and not sent.get("delivered"):
                why = f"{sent.get('classification')}, {sent.get('http_status')}, {sent.get('response')}"
                if attempt == SENDS:
                    raise Failed(f"the test event was not delivered: {why}")
                print(f"     send {attempt}: not delivered ({why}); sending again", flush=True)
                time.sleep(3)
                continue
            try:
                got = receiver.wait_for(path, args.wait / SENDS if attempt < SENDS else args.wait)
                break
            except Failed:
                if attempt == SENDS:
                    raise
                print(f"     send {attempt}: nothing arrived yet; sending again", flush=True)
        verify_signature(secret, got["headers"], got["body"], time.time())
        payload = json.loads(got["body"])
        if payload.get("type") != TEST_EVENT_TYPE:
            raise Failed(f"the receiver got type {payload.get('type')!r}, not {TEST_EVENT_TYPE}")
        if message_ids and got["headers"]["webhook-id"] not in message_ids:
            raise Failed(f"the receiver got webhook-id {got['headers']['webhook-id']}, the API said {sorted(message_ids)}")
        self.ok("test event arrived at the receiver, signature verified with the signing secret")

        want = {"create_account", "send_test_event"}
        deadline = time.monotonic() + args.wait
        while True:
            page = api.expect(200, "GET", f"/operator/accounts/{account_id}/audit?limit=100", self.operator)
            actions = {e["action"] for e in page["data"]}
            if want <= actions or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        if not want <= actions:
            raise Failed(f"the audit history lacks {sorted(want - actions)} (it has {sorted(actions)})")
        for e in sorted(page["data"], key=lambda e: e["at"]):
            print(f"     audit: {e['at']} {e['action']} by {e['operator']}", flush=True)
        self.ok("audit history shows the account's creation and the test event")

    @staticmethod
    def test_event_outcome(api: "Api", token: str, subscription: str, queued: dict, timeout: float) -> dict:
        """Polls a queued test event until the delivery function has sent it; the test event as
        it then reads (still queued after `timeout`: as last read)."""
        path = f"/v1/subscriptions/{subscription}/test-events/{queued['test_event_id']}"
        deadline = time.monotonic() + timeout
        seen = queued
        while seen.get("status") != "sent" and time.monotonic() < deadline:
            time.sleep(0.2)
            status, body = api.call("GET", path, token)
            if status != 200:
                raise Failed(f"GET {path}: {status} ({(body or {}).get('detail')})")
            seen = body
        return seen

    def clean_up(self):
        """Removes what `run` made, as far as it got; a failure here fails the run too."""
        api = self.api
        if "account" not in self.made:
            return
        account_id, token = self.made["account"]
        account = f"/operator/accounts/{account_id}"
        try:
            for kind in ("subscription", "integration"):
                if kind in self.made:
                    path = f"/v1/{kind}s/{self.made[kind]}"
                    api.expect(204, "DELETE", path, token)
                    api.expect(404, "GET", path, token)
        finally:
            # Whatever failed before, the account goes (with its tokens and anything left of it).
            api.expect(204, "DELETE", account, self.operator, {"reason": "smoke test cleanup"})
        api.expect(404, "GET", account, self.operator)
        api.expect(401, "GET", "/v1/whoami", token)
        page = api.expect(200, "GET", f"{account}/audit?limit=100", self.operator)
        if not any(e["action"] == "delete_account" for e in page["data"]):
            raise Failed("the audit history lacks the account's deletion")
        self.ok("cleaned up: subscription, integration and account deleted, the deletion audited")


def main() -> int:
    parser = argparse.ArgumentParser(description="Smoke test of a Rhythm delivery stack.")
    parser.add_argument("--api", default=os.environ.get("RHYTHM_API_URL"), help="the stack's API URL (RHYTHM_API_URL)")
    parser.add_argument("--listen", default="127.0.0.1:0", help="address:port the receiver listens on")
    parser.add_argument("--receiver-url", help="public URL that forwards to the receiver (default: its loopback URL)")
    parser.add_argument("--wait", type=float, default=30.0, help="seconds to wait for the test event and the audit")
    parser.add_argument("--http-timeout", type=float, default=30.0, help="seconds one API call may take")
    args = parser.parse_args()
    operator_token = os.environ.get("RHYTHM_OPERATOR_TOKEN")
    if not args.api or not operator_token:
        parser.error("give the API URL (--api or RHYTHM_API_URL) and RHYTHM_OPERATOR_TOKEN")

    started = time.monotonic()
    receiver = Receiver(args.listen)
    smoke = Smoke(args, operator_token)
    failure = None
    try:
        smoke.run(receiver)
    except Failed as e:
        failure = e
    try:
        smoke.clean_up()
    except Failed as e:
        failure = failure or Failed(f"cleanup: {e}")
    receiver.stop()
    took = time.monotonic() - started
    if failure:
        print(f"not ok - {failure}", file=sys.stderr, flush=True)
        print(f"smoke: FAILED after {smoke.passed} steps ({took:.1f} s)", flush=True)
        return 1
    print(f"smoke: {smoke.passed} steps passed ({took:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
