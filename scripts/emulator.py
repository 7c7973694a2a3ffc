"""The local AWS emulator: moto's server application behind one lock.

moto server answers requests on parallel threads, and its item writes are read-modify-write
sequences without locking: two concurrent conditional updates of one item can both succeed, and a
transaction can write back a stale copy of an item another request just changed. DynamoDB applies
each item write atomically, and this project's correctness (conditional claims, idempotency keys,
counters) rests on that. Serialising requests makes every request atomic, which is the property the
tests need; the emulator's speed is not what they measure.

It also answers `ReturnConsumedCapacity` with the units DynamoDB would charge (see capacity.py),
which the benchmark's cost figures are read from.

It is served by waitress with HTTP/1.1 keep-alive, as AWS endpoints serve the SDK: werkzeug's
development server (moto's own) answers every request with `Connection: close`, so each SDK call
paid for a new TCP connection and a new server thread, which is neither what AWS costs a client
nor fair to the benchmark's CPU figures. The SDK's headers have no underscores, so moto's
werkzeug request handler (which keeps underscored S3 metadata headers) is not needed here.

Usage: python scripts/emulator.py HOST PORT
"""

import sys
import threading

from waitress import serve

from capacity import ConsumedCapacity
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app


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
    serve(
        Serialised(ConsumedCapacity(app)),
        host=host,
        port=port,
        # Requests run one at a time (Serialised); the threads only wait for the lock.
        threads=8,
        # Every test's clients keep their connections open: allow many, and keep idle ones
        # for as long as a test suite runs (a client that finds one closed reconnects).
        connection_limit=2000,
        channel_timeout=3600,
        # A large transaction or batch answer in one piece.
        outbuf_overflow=64 * 1024 * 1024,
        ident="moto",
        _quiet=True,
    )


if __name__ == "__main__":
    main()
