"""Cold start, measured locally: each function's initialisation time and package size.

Initialisation is the time from starting a function's `bootstrap` to its first call of the Lambda
Runtime API's `GET /2018-06-01/runtime/invocation/next`: everything `main` does before it can take
an event (logging, configuration, SDK clients). A stand-in Runtime API on loopback records that
moment and never answers, then the process is stopped. Each function is started five times; the
median is reported, with the size of the bootstrap and of its deflated zip.

With a second argument, the shipped packages' sizes too: the directory `cargo lambda build`
writes (`make build`: arm64, fat LTO, stripped), one `NAME/bootstrap` per function.

Usage: python scripts/coldstart.py TARGET_DIR [LAMBDA_DIR]
  TARGET_DIR: host binaries built with --profile bench (target/release)
  LAMBDA_DIR: target/lambda after `make build`
"""

import http.server
import io
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import zipfile

FUNCTIONS = ["ingest", "dispatch", "deliver", "notify", "reconcile", "api"]
RUNS = 5


class Recorder(http.server.BaseHTTPRequestHandler):
    first_next = None

    def do_GET(self):  # noqa: N802 (the standard library's name)
        if self.path.endswith("/runtime/invocation/next") and Recorder.first_next is None:
            Recorder.first_next = time.perf_counter()
        time.sleep(5)  # never hand out an event: the measurement is over

    def log_message(self, *args):
        pass


def measure(binary: str) -> float:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Recorder.first_next = None
    env = dict(os.environ)
    env.update({
        "AWS_LAMBDA_RUNTIME_API": f"127.0.0.1:{server.server_address[1]}",
        "AWS_LAMBDA_FUNCTION_NAME": "coldstart",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256",
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_LOG_STREAM_NAME": "coldstart",
        "AWS_LAMBDA_LOG_GROUP_NAME": "coldstart",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "CHANGES_TABLE": "c", "DELIVERY_TABLE": "d", "NOTIFICATION_TABLE": "n",
        "DELIVERY_QUEUE_URL": "http://127.0.0.1:1/q", "NOTIFICATION_QUEUE_URL": "http://127.0.0.1:1/n",
        "RUST_LOG": "off",
    })
    started = time.perf_counter()
    proc = subprocess.Popen([binary], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = started + 10
    while Recorder.first_next is None and time.perf_counter() < deadline:
        time.sleep(0.0005)
    proc.kill()
    proc.wait()
    server.shutdown()
    if Recorder.first_next is None:
        raise SystemExit(f"{binary} never asked the Runtime API for an event")
    return (Recorder.first_next - started) * 1000


def zipped(path: str) -> int:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        z.write(path, "bootstrap")
    return len(buffer.getvalue())


def main() -> None:
    target = sys.argv[1]
    packages = sys.argv[2] if len(sys.argv) > 2 else None
    rows = []
    for name in FUNCTIONS:
        binary = os.path.join(target, name)
        init = statistics.median(measure(binary) for _ in range(RUNS))
        row = {"function": name, "init_ms": round(init, 1),
               "bootstrap_mb": round(os.path.getsize(binary) / 1e6, 2),
               "zipped_mb": round(zipped(binary) / 1e6, 2)}
        if packages:
            shipped = os.path.join(packages, name, "bootstrap")
            row["package_bootstrap_mb"] = round(os.path.getsize(shipped) / 1e6, 2)
            row["package_zipped_mb"] = round(zipped(shipped) / 1e6, 2)
        rows.append(row)
    print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
