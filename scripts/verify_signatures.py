#!/usr/bin/env python3
"""Verifies the Standard Webhooks signature of every request a chaos run's endpoints received,
with the reference implementation (PyPI `standardwebhooks`).

Input: a JSONL file, one request a line: {"secret", "received_at" (epoch seconds), "headers",
"body"}. The run's clock is virtual, so each request is verified as of the moment it arrived
(the package's five-minute timestamp tolerance applies to that moment). Prints
{"checked": n, "failed": n, "failures": [...]} as JSON.
"""
import json
import sys
from datetime import datetime, timezone

import standardwebhooks.webhooks as reference


class _ReceiverClock(datetime):
    """The receiver's clock: the package reads `datetime.now`; it answers the arrival time."""

    at = None

    @classmethod
    def now(cls, tz=None):
        return cls.at


def main(path):
    checked, failures = 0, []
    reference.datetime = _ReceiverClock
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            request = json.loads(line)
            _ReceiverClock.at = datetime.fromtimestamp(request["received_at"], tz=timezone.utc)
            checked += 1
            try:
                reference.Webhook(request["secret"]).verify(request["body"], request["headers"])
            except Exception as error:  # every refusal is a failure to report
                failures.append({
                    "line": number,
                    "webhook_id": request["headers"].get("webhook-id"),
                    "error": f"{type(error).__name__}: {error}",
                })
    print(json.dumps({"checked": checked, "failed": len(failures), "failures": failures[:20]}))


if __name__ == "__main__":
    main(sys.argv[1])
