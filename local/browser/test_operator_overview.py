"""The operator's overview in Chromium: the start page lists every account with its health over
the last day (the account with trouble first), finds one by name, and opens its Event monitor in
one click; the attention queue lists what needs an operator in every account, oldest first, and
links to the form that acts."""

from playwright.sync_api import expect

from conftest import screenshot, sign_in


def test_the_operator_home_lists_every_account_with_its_health_and_opens_an_event_monitor_in_one_click(page, stack):
    sign_in(page, stack, stack.operator_link())
    page.goto(stack.url("/console/op"))
    rows = page.locator("#accounts tr[data-testid=account-row]")
    expect(rows).to_have_count(3)
    northwind, contoso = stack.manifest["northwind"]["id"], stack.manifest["contoso"]["id"]
    # Northwind's Legacy CRM deliveries died: newest trouble first.
    expect(rows.first).to_have_attribute("data-account-id", northwind)
    expect(rows.first.get_by_test_id("account-link")).to_have_text("Northwind Traders")
    assert int(rows.first.get_by_test_id("health-dead").inner_text()) >= 1
    for other in (contoso, stack.manifest["bulk"]["id"]):
        row = page.locator(f'#accounts tr[data-account-id="{other}"]')
        expect(row.get_by_test_id("health-dead")).to_have_text("0")
        expect(row).to_have_attribute("data-troubled", "false")
    expect(page.locator(f'#accounts tr[data-account-id="{contoso}"]').get_by_test_id("health-delivered")).to_have_text("1")
    screenshot(page, "operator-home")

    page.locator("#q").fill("cont")
    page.get_by_test_id("search-accounts").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-account-id", contoso)
    rows.first.get_by_test_id("account-link").click()
    page.wait_for_url(f"**/console/op/events?account={contoso}")
    expect(page.locator("#events tr[data-testid=event-row]")).to_have_count(1)


def test_the_attention_queue_lists_every_accounts_trouble_oldest_first_and_links_to_the_retry_form(page, stack):
    sign_in(page, stack, stack.operator_link())
    page.get_by_test_id("nav-attention").click()
    page.wait_for_url("**/console/op/attention")
    rows = page.locator("#attention-queue tr[data-testid=queue-row]")
    expect(rows.first).to_be_visible()
    northwind = stack.manifest["northwind"]
    dead = page.locator(f'#attention-queue tr[data-kind=dead_delivery][data-account-id="{northwind["id"]}"]')
    assert dead.count() >= 1
    expect(dead.first.get_by_test_id("queue-account")).to_have_text("Northwind Traders")
    since = rows.locator("td[data-label=Since] time").evaluate_all("ts => ts.map(t => t.getAttribute('datetime'))")
    assert since == sorted(since), since
    screenshot(page, "attention-queue")

    dead.first.get_by_test_id("queue-act").click()
    page.wait_for_url("**/retry")
    expect(page.locator("#reason")).to_be_visible()
    assert f"/subscriptions/{northwind['subscriptions']['crm']}/deliveries/" in page.url
