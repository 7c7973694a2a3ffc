"""An account administrator recovers their own integrations from the console in Chromium, without
an operator: a dead delivery retried with a reason (and seen delivered, the payload that was
sent beside the attempts' answers), a paused subscription resumed, a day's failed deliveries
recovered as a job (beside the endpoint's health and its 24-hour chart), each in the subscription's
audit history with the administrator as who did it; the pages speak in names (the retry policy
in words, the subscription by its integration's name)."""

import datetime as dt
import re

from playwright.sync_api import expect

from conftest import screenshot, sign_in

LIVE_SECS = 45


def status(locator):
    return locator.locator("xpath=descendant-or-self::*[@data-status]").first


def audit_row(page, reason: str):
    return page.locator("#audit tr[data-testid=audit-row]", has_text=reason)


def test_an_administrator_retries_a_dead_delivery_with_a_reason_and_sees_it_delivered_and_audited_as_the_administrator(page, stack):
    sign_in(page, stack, stack.admin_link("northwind"))
    northwind = stack.manifest["northwind"]
    crm = northwind["subscriptions"]["crm"]
    # The operator's test retries the first change; this one retries the second.
    change = northwind["changes"][1]
    page.goto(stack.url(f"/console/acct/subscriptions/{crm}/deliveries/{change}"))
    expect(status(page.locator("#delivery").get_by_test_id("delivery-status"))).to_have_attribute("data-status", "dead")
    expect(page.locator("#attempts tr[data-testid=attempt-row]")).to_have_count(6)
    expect(page.locator("h1")).to_contain_text("Legacy CRM")
    payload = page.get_by_test_id("payload")
    expect(payload).to_contain_text(f'"change_id": "{change}"')
    screenshot(page, "admin-delivery")

    reason = "CRM database restored; we resend it ourselves (browser test)"
    page.get_by_test_id("retry-link").click()
    expect(page.locator("main")).to_contain_text("Legacy CRM")
    page.locator("#reason").fill(reason)
    page.get_by_test_id("confirm").click()
    expect(page.get_by_test_id("notice")).to_contain_text("retried")
    expect(status(page.locator("#delivery").get_by_test_id("delivery-status"))).to_have_attribute(
        "data-status", "delivered", timeout=LIVE_SECS * 1000
    )

    page.goto(stack.url(f"/console/acct/subscriptions/{crm}"))
    row = audit_row(page, reason)
    expect(row).to_have_count(1)
    expect(row.get_by_test_id("audit-action")).to_contain_text("retry")
    expect(row.get_by_test_id("audit-operator")).to_contain_text("token")
    expect(row.get_by_test_id("audit-role")).to_have_text("administrator")
    # The retry policy in words, never its JSON.
    expect(page.get_by_test_id("retry-policy")).to_contain_text("1 m, 5 m, 30 m, 2 h, 6 h, then dead")
    assert '"kind"' not in page.locator("main").inner_text()


def test_an_administrator_resumes_the_paused_subscription_and_the_audit_shows_the_administrator(page, stack):
    sign_in(page, stack, stack.admin_link("northwind"))
    feed = stack.manifest["northwind"]["subscriptions"]["feed"]
    page.get_by_test_id("nav-attention").click()
    paused = page.locator(f'#paused-subscriptions tr[data-testid=paused-row][data-subscription-id="{feed}"]')
    expect(paused).to_contain_text("Warehouse feed")
    paused.get_by_test_id("resume-link").click()
    page.wait_for_url(re.compile(f"/console/acct/subscriptions/{feed}/resume$"))
    screenshot(page, "admin-resume")
    reason = "the warehouse feed is back (browser test)"
    page.locator("#reason").fill(reason)
    page.get_by_test_id("confirm").click()
    page.wait_for_url(re.compile(f"/console/acct/subscriptions/{feed}\\?done=resumed$"))
    expect(status(page.get_by_test_id("subscription-status"))).to_have_attribute("data-status", "active")
    row = audit_row(page, reason)
    expect(row.get_by_test_id("audit-action")).to_contain_text("resume")
    expect(row.get_by_test_id("audit-role")).to_have_text("administrator")
    screenshot(page, "admin-subscription")


def test_an_administrator_recovers_a_days_failed_deliveries_and_watches_the_job_finish(page, stack):
    sign_in(page, stack, stack.admin_link("northwind"))
    crm = stack.manifest["northwind"]["subscriptions"]["crm"]
    page.goto(stack.url(f"/console/acct/subscriptions/{crm}"))
    # Endpoint health: the figures and the chart of the last day.
    health = page.locator("#endpoint-health")
    expect(health.get_by_test_id("dead-run")).to_contain_text("pauses at 50")
    expect(health.get_by_test_id("health-chart")).to_be_visible()
    screenshot(page, "admin-health")

    page.get_by_test_id("recover-link").click()
    page.wait_for_url(re.compile(f"/console/acct/subscriptions/{crm}/recover$"))
    expect(page.locator("#status-dead")).to_be_checked()
    expect(page.locator("#status-failed")).to_be_checked()
    # Failed ones only: the seed's last dead delivery stays dead for the operators' tests (the
    # restart itself is checked by the console's HTTP tests).
    page.locator("#status-dead").uncheck()
    since = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=1)
    page.locator("#since").fill(since.strftime("%Y-%m-%dT%H:%M"))
    reason = "recover what failed for the CRM (browser test)"
    page.locator("#reason").fill(reason)
    screenshot(page, "admin-recover")
    page.get_by_test_id("confirm").click()
    job = page.locator("#replay-job")
    expect(page.locator("h1")).to_contain_text("Recovery job")
    expect(status(job.get_by_test_id("replay-status"))).to_have_attribute("data-status", "completed", timeout=LIVE_SECS * 1000)
    expect(job.get_by_test_id("replay-by")).to_contain_text("token")
    screenshot(page, "admin-recovery-job")

    page.goto(stack.url(f"/console/acct/subscriptions/{crm}"))
    row = audit_row(page, reason)
    expect(row.get_by_test_id("audit-action")).to_contain_text("recover")
    expect(row.get_by_test_id("audit-role")).to_have_text("administrator")
