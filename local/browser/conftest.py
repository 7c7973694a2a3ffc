"""The browser tests' harness: the served stack, Debian's headless Chromium through Playwright,
signing in with login links, and the watch that fails a test on any console error, page error,
failed request or unexpected answer >= 400.

Run by scripts/browser-tests.sh (and so by `make test`), which installs everything and starts the
emulator; the stack (local/src/bin/console_stack.rs) is started here once per session and stops
when its standard input closes.
"""

import json
import os
import pathlib
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

import pytest
from playwright.sync_api import sync_playwright

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
OUT = ROOT / "target" / "browser"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
# The pinned axe-core that scripts/axe-core.sh fetched and checked (scripts/browser-tests.sh sets it).
AXE_JS = os.environ.get("AXE_JS", "")
STACK_READY_SECS = 300

# Figures the tests measured, printed once at the end of the run (and kept in OUT/figures.json).
FIGURES: list[dict] = []


@dataclass
class Stack:
    manifest: dict
    log: pathlib.Path

    @property
    def base(self) -> str:
        return self.manifest["base"]

    def url(self, path: str) -> str:
        return self.base + path

    def call(self, method: str, path: str, token: str, body=None):
        """The JSON API, as a client calls it: (status, parsed body)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url(path), data=data, method=method)
        request.add_header("Authorization", f"Bearer {token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def operator_link(self) -> str:
        status, body = self.call("POST", "/operator/console-links", self.manifest["operator_token"], {})
        assert status == 201, body
        return body["url"]

    def admin_link(self, account: str) -> str:
        """A login link as `account`'s administrator, through the account's own token."""
        status, body = self.call("POST", "/v1/console-links", self.manifest[account]["token"], {})
        assert status == 201, body
        return body["url"]


@pytest.fixture(scope="session")
def stack():
    binary = os.environ.get("CONSOLE_STACK", str(ROOT / "target" / "debug" / "console_stack"))
    OUT.mkdir(parents=True, exist_ok=True)
    log = OUT / "console_stack.log"
    env = dict(os.environ)
    env.setdefault("RUST_LOG", "warn")
    with open(log, "w") as out:
        # Its standard input is a pipe held by this process: when pytest ends, however it ends,
        # the pipe closes and the stack stops serving.
        proc = subprocess.Popen([binary], stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    try:
        manifest = None
        deadline = time.monotonic() + STACK_READY_SECS
        while manifest is None:
            for line in log.read_text(errors="replace").splitlines():
                if line.startswith("manifest: "):
                    manifest = json.loads(line[len("manifest: "):])
            if manifest is not None:
                break
            if proc.poll() is not None:
                pytest.fail(f"console_stack exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"console_stack printed no manifest within {STACK_READY_SECS} s:\n{log.read_text()[-4000:]}")
            time.sleep(0.2)
        yield Stack(manifest, log)
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def browser():
    with sync_playwright() as p:
        # Debian's Chromium; as root it needs --no-sandbox.
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


@dataclass
class Watch:
    """Everything a page did wrong. `expect(status, part)` allows answers with `status` to
    URLs containing `part` (a test that provokes a 404 or a refusal says so)."""

    problems: list[str] = field(default_factory=list)
    allowed: list[tuple[int, str]] = field(default_factory=list)

    def expect(self, status: int, part: str):
        self.allowed.append((status, part))

    def is_allowed(self, status: int, url: str) -> bool:
        return any(status == s and part in url for s, part in self.allowed)

    def attach(self, page):
        page.on("console", self._console)
        page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        page.on("requestfailed", self._failed)
        page.on("response", self._response)

    def _console(self, msg):
        if msg.type != "error":
            return
        # Chromium logs every answer >= 400 as a console error too; those are judged by status.
        if msg.text.startswith("Failed to load resource: the server responded with a status of"):
            status = int(msg.text.split("status of ")[1].split()[0])
            if self.is_allowed(status, msg.location.get("url", "")):
                return
        self.problems.append(f"console error: {msg.text} ({msg.location.get('url', '')})")

    def _failed(self, request):
        failure = request.failure or ""
        # A navigation away from a page that is still polling cancels its request.
        if "ERR_ABORTED" in failure:
            return
        self.problems.append(f"request failed: {request.method} {request.url}: {failure}")

    def _response(self, response):
        if response.status >= 400 and not self.is_allowed(response.status, response.url):
            self.problems.append(f"answer {response.status}: {response.request.method} {response.url}")


@pytest.fixture
def watch():
    return Watch()


def new_page(browser, watch: Watch, **context_args):
    context = browser.new_context(viewport={"width": 1280, "height": 860}, **context_args)
    context.set_default_timeout(15_000)
    page = context.new_page()
    watch.attach(page)
    return context, page


@pytest.fixture
def page(browser, watch):
    context, page = new_page(browser, watch)
    yield page
    context.close()
    assert not watch.problems, "the page had problems:\n" + "\n".join(watch.problems)


def sign_in(page, stack: Stack, link: str):
    """Opens a login link and continues: the session cookie is set by the sign-in POST."""
    page.goto(stack.url(link))
    page.get_by_test_id("login-continue").click()
    page.wait_for_url(lambda url: "/console/login" not in url)
    assert page.get_by_test_id("signed-in-as").is_visible()


def screenshot(page, name: str):
    """A screenshot of the viewport: target/browser/console-NAME.png on every run, and the README's
    docs/console-NAME.png when UPDATE_SCREENSHOTS=1 (so a test run leaves the tree clean)."""
    OUT.mkdir(parents=True, exist_ok=True)
    to = DOCS if os.environ.get("UPDATE_SCREENSHOTS") == "1" else OUT
    page.screenshot(path=str(to / f"console-{name}.png"))


@pytest.fixture(scope="session")
def axe_js() -> pathlib.Path:
    """The pinned axe-core script; missing is a failure, never a skip."""
    path = pathlib.Path(AXE_JS) if AXE_JS else None
    if path is not None and not path.is_absolute():
        path = ROOT / path
    if path is None or not path.is_file():
        pytest.fail("AXE_JS names no axe-core script: run the browser tests with scripts/browser-tests.sh")
    return path


def record_figure(figure: dict):
    FIGURES.append(figure)


def pytest_terminal_summary(terminalreporter):
    if not FIGURES:
        return
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "figures.json").write_text(json.dumps(FIGURES, indent=2) + "\n")
    for f in FIGURES:
        terminalreporter.write_line(f["line"])
