"""Accessibility of the console in Chromium: axe-core (pinned, fetched and checked by
scripts/axe-core.sh) is injected into every console page of both audiences, at 1280 and 360 px
wide, in the light and the dark theme, and any serious or critical violation fails the test; the
results per page are printed at the end of the run (and kept in target/browser/axe.json). The
forms that act (retry, replay, resume, requeue) are walked with the keyboard."""

import json

import pytest

from conftest import OUT, record_figure, sign_in

WIDTHS = (1280, 360)
SCHEMES = ("light", "dark")
FAILING_IMPACTS = ("serious", "critical")
# Any notice id and delivery key: the requeue form is a confirmation that the POST checks.
REQUEUE = "/console/op/notifications/ntc_a11y/deliveries/email-0/requeue"
UNKNOWN = "/console/op/no-such-page"
UNKNOWN_ACCT = "/console/acct/no-such-page"

RESULTS: dict[str, dict[str, int]] = {}


def operator_pages(stack) -> list[str]:
    n = stack.manifest["northwind"]
    a, crm, shop = n["id"], n["subscriptions"]["crm"], n["subscriptions"]["shop"]
    change = n["changes"][0]
    base = f"/console/op/accounts/{a}"
    return [
        "/console/op",
        "/console/op?q=north",
        "/console/op/attention",
        f"/console/op/attention?account={a}",
        f"/console/op/events?account={a}",
        f"/console/op/events?account={a}&status=failed",
        base,
        f"{base}/events/{change}",
        f"{base}/subscriptions/{crm}",
        f"{base}/subscriptions/{crm}/deliveries/{change}",
        f"{base}/subscriptions/{crm}/deliveries/{change}/retry",
        f"{base}/subscriptions/{crm}/resume",
        f"{base}/subscriptions/{shop}/replay",
        "/console/op/replays",
        f"/console/op/replays?account={a}",
        "/console/op/notifications",
        "/console/op/catalog",
        REQUEUE,
        UNKNOWN,
    ]


def admin_pages(stack) -> list[str]:
    n = stack.manifest["northwind"]
    crm, change, feed = n["subscriptions"]["crm"], n["changes"][0], n["subscriptions"]["feed"]
    return [
        "/console/acct",
        "/console/acct/events",
        f"/console/acct/events/{change}",
        f"/console/acct/subscriptions/{crm}",
        f"/console/acct/subscriptions/{crm}/deliveries/{change}",
        f"/console/acct/subscriptions/{crm}/deliveries/{n['changes'][2]}/retry",
        f"/console/acct/subscriptions/{crm}/recover",
        f"/console/acct/subscriptions/{crm}/replay",
        f"/console/acct/subscriptions/{feed}/resume",
        "/console/acct/attention",
        "/console/acct/manage",
        "/console/acct/catalog",
        UNKNOWN_ACCT,
    ]


def audit(page, axe_js) -> list[dict]:
    """axe-core's violations of the page as it is now (every rule axe runs by default)."""
    page.add_script_tag(path=str(axe_js))
    result = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    return result["violations"]


def failing(violations: list[dict]) -> list[str]:
    return [
        f"{v['id']} ({v['impact']}, {len(v['nodes'])} elements): {v['help']}; first: {v['nodes'][0]['target']}"
        for v in violations
        if v["impact"] in FAILING_IMPACTS
    ]


def audit_all(browser, watch, axe_js, stack, link, paths):
    """Each path at each width and theme (a fresh context per combination, signed in with a
    new link, CSP bypassed so the test may inject axe): the failing violations found."""
    found = []
    for width in WIDTHS:
        for scheme in SCHEMES:
            context = browser.new_context(viewport={"width": width, "height": 860}, color_scheme=scheme, bypass_csp=True)
            context.set_default_timeout(15_000)
            page = context.new_page()
            watch.attach(page)
            try:
                if link is not None:
                    sign_in(page, stack, link())
                for path in paths:
                    response = page.goto(stack.url(path))
                    expected = 404 if "no-such-page" in path else 200
                    assert response.status == expected, (path, response.status)
                    bad = failing(audit(page, axe_js))
                    label = f"{path} @{width}px {scheme}"
                    RESULTS.setdefault(path, {})[f"{width} {scheme}"] = len(bad)
                    found.extend(f"{label}: {b}" for b in bad)
            finally:
                context.close()
    return found


def summarise():
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "axe.json").write_text(json.dumps(RESULTS, indent=2) + "\n")


def test_every_operator_page_has_no_serious_or_critical_axe_violation_at_either_width_or_theme(browser, stack, watch, axe_js):
    watch.expect(404, "no-such-page")
    paths = operator_pages(stack)
    found = audit_all(browser, watch, axe_js, stack, stack.operator_link, paths)
    summarise()
    for path in paths:
        record_figure({"line": f"axe operator {path}: serious/critical {RESULTS[path]}"})
    assert not found, "axe found serious or critical violations:\n" + "\n".join(found)
    assert not watch.problems, "\n".join(watch.problems)


def test_every_administrator_page_and_the_sign_in_page_have_no_serious_or_critical_axe_violation(browser, stack, watch, axe_js):
    watch.expect(404, "no-such-page")
    paths = admin_pages(stack)
    found = audit_all(browser, watch, axe_js, stack, lambda: stack.admin_link("northwind"), paths)
    found += audit_all(browser, watch, axe_js, stack, None, ["/console/login", "/console/no-such-page"])
    summarise()
    for path in paths + ["/console/login", "/console/no-such-page"]:
        record_figure({"line": f"axe administrator {path}: serious/critical {RESULTS[path]}"})
    assert not found, "axe found serious or critical violations:\n" + "\n".join(found)
    assert not watch.problems, "\n".join(watch.problems)


def focus_order(page, count: int) -> list[str]:
    """From the page's "← Back" link, the next `count` controls Tab reaches (id or test id).
    A date-time field takes several Tabs (one per part of the date): it counts once."""
    page.locator("main a", has_text="Back").first.focus()
    order: list[str] = []
    for _ in range(count * 8):
        page.keyboard.press("Tab")
        now = page.evaluate("() => document.activeElement.id || document.activeElement.dataset.testid || document.activeElement.tagName")
        if not order or order[-1] != now:
            order.append(now)
        if len(order) == count:
            break
    return order


@pytest.mark.parametrize("form", ["retry", "resume", "replay", "requeue"])
def test_the_forms_that_act_are_walked_with_the_keyboard_in_reading_order(page, stack, form):
    sign_in(page, stack, stack.operator_link())
    n = stack.manifest["northwind"]
    base = f"/console/op/accounts/{n['id']}"
    path, order = {
        "retry": (f"{base}/subscriptions/{n['subscriptions']['crm']}/deliveries/{n['changes'][0]}/retry", ["reason", "confirm", "cancel"]),
        "resume": (f"{base}/subscriptions/{n['subscriptions']['crm']}/resume", ["reason", "confirm", "cancel"]),
        "replay": (f"{base}/subscriptions/{n['subscriptions']['shop']}/replay", ["from", "to", "reason", "confirm", "cancel"]),
        "requeue": (REQUEUE, ["reason", "confirm", "cancel"]),
    }[form]
    page.goto(stack.url(path))
    assert focus_order(page, len(order)) == order
    # The focused control is visibly marked (the focus ring), and Enter on the confirm button
    # submits: with the reason empty the browser refuses and moves the focus to the first field
    # it refuses.
    page.keyboard.press("Shift+Tab")
    assert page.evaluate("() => document.activeElement.dataset.testid") == "confirm"
    outline = page.evaluate("() => getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none", outline
    page.keyboard.press("Enter")
    refused = page.evaluate("() => [document.activeElement.id, document.activeElement.matches(':invalid')]")
    assert refused[1] and refused[0] in order, refused
    assert page.url == stack.url(path), "nothing was submitted"
