"""The web console in a real browser (Debian's headless Chromium), against the served local
stack: the seeded events and their statuses, a dead delivery retried and audited, a window
replayed, an 8-day window refused with the API's message, an account administrator kept out
of another account, sending a test event, a rotation's overlap, a subscription's delivery log,
and a session's cookie, its sign-out and its link's one use.
Every test fails on a console error or a failed request (conftest.Watch)."""

import datetime as dt
import re

from playwright.sync_api import expect

from conftest import new_page, record_figure, screenshot, sign_in

LIVE_SECS = 45


def status(locator):
    """The lifecycle badge in (or at) `locator`: its `data-status` is the stored status."""
    return locator.locator("xpath=descendant-or-self::*[@data-status]").first


def op_account(stack, account: str) -> str:
    return f"/console/op/accounts/{stack.manifest[account]['id']}"


def api_events(stack, account: str) -> dict:
    status, body = stack.call("GET", "/v1/events?limit=50", stack.manifest[account]["token"])
    assert status == 200, body
    return {e["id"]: e for e in body["data"]}


def utc_minute(t: dt.datetime) -> str:
    """A `datetime-local` value (the console's replay form takes UTC)."""
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M")


def test_an_operator_signs_in_with_a_link_and_sees_the_seeded_events_with_their_statuses(page, stack):
    sign_in(page, stack, stack.operator_link())
    northwind = stack.manifest["northwind"]
    page.goto(stack.url(f"/console/op/events?account={northwind['id']}"))
    expected = api_events(stack, "northwind")
    assert set(northwind["changes"]) <= set(expected), "the API lists every seeded change"
    rows = page.locator("#events tr[data-testid=event-row]")
    expect(rows).to_have_count(len(expected))
    for change_id, event in expected.items():
        row = page.locator(f'#events tr[data-testid=event-row][data-event-id="{change_id}"]')
        expect(status(row.get_by_test_id("event-status"))).to_have_attribute("data-status", event["event_status"])
        expect(status(row.get_by_test_id("internal-status"))).to_have_attribute("data-status", event["internal_status"])
    # The seed's story: CRM's three dead deliveries fail their events; the change made after
    # CRM was fixed is sent to both.
    statuses = [e["event_status"] for e in expected.values()]
    assert statuses.count("failed") == 3 and statuses.count("sent") == 1, statuses
    screenshot(page, "event-monitor")


def test_an_operator_retries_a_dead_delivery_with_a_reason_and_sees_it_delivered_and_audited(page, stack):
    sign_in(page, stack, stack.operator_link())
    northwind = stack.manifest["northwind"]
    crm = northwind["subscriptions"]["crm"]
    change = northwind["changes"][0]
    page.goto(stack.url(f"{op_account(stack, 'northwind')}/events/{change}"))
    row = page.locator(f'#delivery-log tr[data-testid=delivery-row][data-subscription-id="{crm}"]')
    expect(status(row.get_by_test_id("delivery-status"))).to_have_attribute("data-status", "dead")
    expect(row.get_by_test_id("attempts")).to_have_text(re.compile(r"\b6\b"))
    screenshot(page, "delivery-log")

    row.get_by_test_id("delivery-link").click()
    expect(status(page.locator("#delivery").get_by_test_id("delivery-status"))).to_have_attribute("data-status", "dead")
    expect(page.locator("#attempts tr[data-testid=attempt-row]")).to_have_count(6)
    screenshot(page, "delivery")

    reason = "CRM database restored; resend requested by the customer (browser test)"
    page.get_by_test_id("retry-link").click()
    page.locator("#reason").fill(reason)
    page.get_by_test_id("confirm").click()
    # The delivery's page refreshes itself while the pipeline delivers the retry.
    expect(status(page.locator("#delivery").get_by_test_id("delivery-status"))).to_have_attribute(
        "data-status", "delivered", timeout=LIVE_SECS * 1000
    )

    page.goto(stack.url(f"{op_account(stack, 'northwind')}/subscriptions/{crm}"))
    audit = page.locator("#audit tr[data-testid=audit-row]", has_text=reason)
    expect(audit).to_have_count(1)
    expect(audit.get_by_test_id("audit-action")).to_contain_text("retry")
    expect(audit.get_by_test_id("audit-operator")).to_have_text(stack.manifest["operator"])
    screenshot(page, "integration-history")


def test_an_operator_replays_a_window_and_watches_the_job_finish(page, stack):
    sign_in(page, stack, stack.operator_link())
    shop = stack.manifest["northwind"]["subscriptions"]["shop"]
    page.goto(stack.url(f"{op_account(stack, 'northwind')}/subscriptions/{shop}"))
    page.get_by_test_id("replay-link").click()
    now = dt.datetime.now(dt.timezone.utc)
    page.locator("#from").fill(utc_minute(now - dt.timedelta(hours=12)))
    page.locator("#to").fill(utc_minute(now))
    page.locator("#reason").fill("Shop re-imports its catalog (browser test)")
    page.get_by_test_id("confirm").click()
    job = page.locator("#replay-job")
    expect(status(job.get_by_test_id("replay-status"))).to_have_attribute("data-status", "completed", timeout=LIVE_SECS * 1000)
    # The window holds the three changes of the seed's story (the fourth may fall after `to`).
    counts = job.get_by_test_id("replay-counts").inner_text()
    restarted = int(re.search(r"(\d+)\s+restarted", counts).group(1))
    assert restarted >= 3, counts
    screenshot(page, "replay-job")


def test_an_eight_day_replay_window_is_refused_with_the_apis_message(page, stack, watch):
    sign_in(page, stack, stack.operator_link())
    northwind = stack.manifest["northwind"]
    shop = northwind["subscriptions"]["shop"]
    now = dt.datetime.now(dt.timezone.utc).replace(second=0, microsecond=0)
    start, end = now - dt.timedelta(days=8), now
    reason = "too wide on purpose (browser test)"
    status, problem = stack.call(
        "POST",
        f"/operator/accounts/{northwind['id']}/subscriptions/{shop}/replays",
        stack.manifest["operator_token"],
        {"from": start.isoformat(), "to": end.isoformat(), "reason": reason},
    )
    assert status == 422, problem
    watch.expect(422, f"/subscriptions/{shop}/replay")

    page.goto(stack.url(f"{op_account(stack, 'northwind')}/subscriptions/{shop}/replay"))
    page.locator("#from").fill(utc_minute(start))
    page.locator("#to").fill(utc_minute(end))
    page.locator("#reason").fill(reason)
    page.get_by_test_id("confirm").click()
    shown = page.get_by_test_id("problem")
    expect(shown.get_by_test_id("problem-detail")).to_have_text(problem["detail"])
    expect(shown).to_have_attribute("data-problem-type", problem["type"])
    screenshot(page, "replay-refused")


def test_an_account_administrator_cannot_reach_another_accounts_event_by_url(page, stack, watch):
    sign_in(page, stack, stack.admin_link("northwind"))
    own = stack.manifest["northwind"]["changes"][0]
    other = stack.manifest["contoso"]["change"]
    screenshot(page, "account-overview")
    response = page.goto(stack.url(f"/console/acct/events/{own}"))
    assert response.status == 200
    expect(page.locator("#delivery-log tr[data-testid=delivery-row]")).to_have_count(2)

    watch.expect(404, f"/console/acct/events/{other}")
    response = page.goto(stack.url(f"/console/acct/events/{other}"))
    assert response.status == 404
    expect(page.get_by_test_id("problem")).to_be_visible()
    assert other not in page.locator("main").inner_text().replace(f"/console/acct/events/{other}", "")


def test_needs_attention_lists_what_an_operator_must_act_on(page, stack):
    sign_in(page, stack, stack.operator_link())
    page.goto(stack.url(f"/console/op/attention?account={stack.manifest['northwind']['id']}"))
    expect(page.locator("#attention-deliveries")).to_be_visible()
    expect(page.locator("#paused-subscriptions")).to_be_visible()
    screenshot(page, "needs-attention")


def test_the_event_monitor_with_a_thousand_events_is_measured_in_the_browser(browser, stack, watch):
    """Page weight (bytes transferred by every request of a cold load) and first contentful
    paint of the operator's Event monitor on the account with 1,000 events: printed as figures,
    not asserted against a budget."""
    bulk = stack.manifest["bulk"]
    context, page = new_page(browser, watch)
    sign_in(page, stack, stack.operator_link())
    cookies = context.cookies()
    context.close()
    path = f"/console/op/events?account={bulk['id']}"
    figures = {}
    for run in ("cold", "warm"):
        if run == "cold":
            # A fresh context: an empty cache, only the session cookie carried over.
            context, page = new_page(browser, watch)
            context.add_cookies(cookies)
        page.goto(stack.url(path), wait_until="load")
        expect(page.locator("#events tr[data-testid=event-row]").first).to_be_visible()
        # The paint entry may be recorded after the load event on a busy machine. Polled from
        # here: `wait_for_function` polls by evaluating a string in the page, which the console's
        # Content-Security-Policy (no 'unsafe-eval') refuses whenever the entry is not there yet.
        for _ in range(200):
            if page.evaluate("performance.getEntriesByName('first-contentful-paint').length > 0"):
                break
            page.wait_for_timeout(50)
        figures[run] = page.evaluate(
            """() => {
              const nav = performance.getEntriesByType('navigation')[0];
              const res = performance.getEntriesByType('resource');
              const fcp = performance.getEntriesByName('first-contentful-paint')[0];
              return {
                bytes: nav.transferSize + res.reduce((n, r) => n + r.transferSize, 0),
                requests: 1 + res.length,
                html_bytes: nav.transferSize,
                ttfb_ms: nav.responseStart,
                fcp_ms: fcp ? fcp.startTime : null,
                rows: document.querySelectorAll('#events tr[data-testid=event-row]').length,
              };
            }"""
        )
    context.close()
    assert not watch.problems, "\n".join(watch.problems)
    cold, warm = figures["cold"], figures["warm"]
    assert cold["fcp_ms"] is not None and cold["bytes"] > 0
    line = (
        f"bench: console event monitor, {bulk['events']} events ({cold['rows']} rows shown): "
        f"cold load {cold['bytes'] / 1024:.1f} KiB in {cold['requests']} requests, "
        f"first byte {cold['ttfb_ms']:.0f} ms, first contentful paint {cold['fcp_ms']:.0f} ms; "
        f"warm load {warm['bytes'] / 1024:.1f} KiB in {warm['requests']} requests, "
        f"first byte {warm['ttfb_ms']:.0f} ms, first contentful paint {warm['fcp_ms']:.0f} ms"
    )
    record_figure({"name": "console_event_monitor_1000_events", "cold": cold, "warm": warm, "line": line})


def test_an_account_administrator_sends_a_test_event_and_sees_the_endpoints_answer(page, stack):
    sign_in(page, stack, stack.admin_link("northwind"))
    shop = stack.manifest["northwind"]["subscriptions"]["shop"]
    page.get_by_test_id("nav-manage").click()
    form = page.locator(f'form[data-testid=test-event-form][data-subscription-id="{shop}"]')
    form.get_by_test_id("send-test-event").click()
    # The test event is queued; the delivery function sends it and htmx, asking again every
    # second, swaps the outcome in beside the button: the Shop endpoint answers 200.
    result = form.get_by_test_id("test-event-result")
    expect(result).to_have_attribute("data-delivered", "true")
    expect(result.get_by_test_id("test-event-status")).to_have_text("200")
    expect(status(result.get_by_test_id("test-event-class"))).to_have_attribute("data-status", "success")
    expect(result.get_by_test_id("test-event-latency")).to_have_text(re.compile(r"^\d+ ms$"))
    result.scroll_into_view_if_needed()
    screenshot(page, "test-event")


def test_an_account_administrator_rotates_a_secret_with_a_grace_and_sees_until_when_the_old_one_signs(page, stack):
    sign_in(page, stack, stack.admin_link("northwind"))
    page.goto(stack.url("/console/acct/manage"))
    row = page.locator("#manage-integrations tr[data-testid=integration-row]", has_text="Shop")
    row.get_by_test_id("rotation-grace").fill("7200")
    before = dt.datetime.now(dt.timezone.utc)
    row.get_by_test_id("rotate-secret").click()
    expect(page.get_by_test_id("shown-signing_secret")).to_have_text(re.compile(r"^whsec_"))
    overlap = page.get_by_test_id("notice").get_by_test_id("secret-overlap")
    expect(overlap).to_be_visible()
    until = overlap.locator("time[data-absolute]")
    # Shown in the viewer's timezone; the instant itself is two hours from the rotation.
    instant = dt.datetime.fromisoformat(until.get_attribute("datetime").replace("Z", "+00:00"))
    assert dt.timedelta(hours=2) - dt.timedelta(minutes=1) <= instant - before <= dt.timedelta(hours=2, minutes=1), instant
    expect(overlap.locator("time:not([data-absolute])")).to_have_text(re.compile(r"in 2 hours|in 120 minutes"))
    # The page keeps saying so on a later visit.
    page.goto(stack.url("/console/acct/manage"))
    expect(page.locator("#manage-integrations tr[data-testid=integration-row]", has_text="Shop").get_by_test_id("secret-overlap")).to_be_visible()
    screenshot(page, "manage")


def test_an_account_administrator_opens_a_subscriptions_delivery_log_from_the_overview(page, stack):
    sign_in(page, stack, stack.admin_link("northwind"))
    crm = stack.manifest["northwind"]["subscriptions"]["crm"]
    page.goto(stack.url("/console/acct"))
    page.locator(f'#endpoint-health tr[data-testid=health-row][data-subscription-id="{crm}"]').get_by_test_id("delivery-log-link").click()
    page.wait_for_url(re.compile(f"/console/acct/subscriptions/{crm}$"))
    rows = page.locator("#deliveries tr[data-testid=delivery-row]")
    expect(rows.first).to_be_visible()
    assert rows.count() >= 3, rows.count()
    for i in range(rows.count()):
        expect(status(rows.nth(i).get_by_test_id("delivery-status"))).to_have_attribute(
            "data-status", re.compile(r"^(dead|delivered|pending|processing|retrying)$")
        )
    screenshot(page, "account-delivery-log")
    rows.first.get_by_test_id("delivery-link").click()
    expect(page.locator("#attempts tr[data-testid=attempt-row]").first).to_be_visible()


def test_a_session_cookie_is_host_only_and_a_signed_out_session_and_a_used_link_are_refused(browser, stack, watch):
    context, page = new_page(browser, watch)
    link = stack.admin_link("northwind")
    sign_in(page, stack, link)
    (cookie,) = [c for c in context.cookies() if c["name"].startswith("__Host-")]
    assert cookie["name"] == "__Host-rhythm_console", cookie
    assert cookie["path"] == "/" and cookie["secure"] and cookie["httpOnly"], cookie
    assert cookie["sameSite"] == "Strict", cookie

    # The link signed in once: opened again it says so, and offers no way on.
    watch.expect(409, "/console/login")
    response = page.goto(stack.url(link))
    assert response.status == 409
    expect(page.get_by_test_id("problem-detail")).to_contain_text("used already")
    expect(page.get_by_test_id("login-continue")).to_have_count(0)

    # Signing out ends the session itself: the old cookie, put back, is refused.
    page.goto(stack.url("/console/acct"))
    page.get_by_test_id("logout").click()
    page.wait_for_url(lambda url: "/console/login" in url)
    context.add_cookies([cookie])
    watch.expect(401, "/console/acct")
    response = page.goto(stack.url("/console/acct"))
    assert response.status == 401
    expect(page.get_by_test_id("session-refused")).to_contain_text("the session has ended")
    context.close()
    assert not watch.problems, "the page had problems:\n" + "\n".join(watch.problems)
