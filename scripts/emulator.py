"""The local AWS emulator: moto's server application behind one lock.

moto server answers requests on parallel threads, and its item writes are read-modify-write
sequences without locking: two concurrent conditional updates of one item can both succeed, and a
transaction can write back a stale copy of an item another request just changed. DynamoDB applies
each item write atomically, and this project's correctness (conditional claims, idempotency keys,
counters) rests on that. Serialising requests makes every request atomic, which is the property the
tests need; the emulator's speed is not what they measure.

It also answers `ReturnConsumedCapacity` with the units DynamoDB would charge (see capacity.py),
which the benchmark's cost figures are read from.

Usage: python scripts/emulator.py HOST PORT
"""

import sys
import threading

from werkzeug.serving import run_simple

from capacity import ConsumedCapacity
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)


class Serialised:
    """WSGI middleware: one request inside the application at a time (the body is read inside)."""

    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):
        with self.lock:
            # Materialise the response inside the lock: moto does its work while it is iterated.
            return list(self.app(environ, start_response))


def main() -> None:
    host, port = sys.argv[1], int(sys.argv[2])
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(host, port, Serialised(ConsumedCapacity(app)), threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
