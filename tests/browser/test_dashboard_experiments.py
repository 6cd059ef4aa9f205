"""The Experiments page in Debian's chromium, against FloKit under gunicorn (issue 35).

A growth lead opens a paywall's experiments from the nav: the audiences in the gateway's order,
the results with the posterior curves of a rate experiment and the lift intervals of a revenue
one (both drawn: `Chart.getChart`), and a sample ratio warning. Shipping the winner goes through
its dialog, which names the mismatch and will not submit until it is acknowledged; once shipped,
the gateway (`GET /api/paywall/config`, asked of the same server) serves the winner to a user no
other experiment takes. Every page passes axe at 1280 and 390 px and is shot.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import requests

from tests.browser.demo_world import check_at_phone_width, settle, sign_in
from tests.browser.support import assert_accessible, expect, shoot
from tests.support import GunicornServer
from tests.support.experiments import PAYWALL, create, plant_results, publish
from warehouse.db import Database
from warehouse.experiments import repository as repo
from warehouse.paywalls import configs
from warehouse.settings import Settings


@pytest.fixture
def settings(module_settings: Settings) -> Settings:
    """The module's one database (tests/browser/conftest.py): each test works in a workspace of its own."""
    return module_settings


@pytest.fixture
def flokit_server(module_server: GunicornServer) -> GunicornServer:
    return module_server


def served(server: GunicornServer, app_id: str) -> dict[str, Any]:
    answer = requests.get(
        f"{server.base}/api/paywall/config",
        params={"app_id": app_id, "paywall_id": PAYWALL},
        headers={"x-user-id": "user-42"},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


def drawn(page: Any, canvas_id: str) -> bool:
    return bool(page.evaluate("id => window.Chart !== undefined && Chart.getChart(id) !== undefined", canvas_id))


def test_the_page_draws_its_charts_and_ship_with_the_srm_confirmation_makes_the_winner_live(
    page: Any, flokit_server: GunicornServer, db: Database, workspace: dict
) -> None:
    app_id = workspace["app_id"]
    publish(db, app_id)
    rate = create(db, workspace, "Annual first", start=True)
    plant_results(db, workspace, rate.id, {"control": (1000, 100), "annual": (760, 120)})  # 50/50: a mismatch
    revenue = create(
        db, workspace, "German prices", metric="revenue_per_user_d14", audience={"country": ["DE"]}, start=True
    )
    plant_results(db, workspace, revenue.id, {"control": (500, 50), "annual": (500, 80)})
    create(db, workspace, "Next idea", priority=3)
    assert served(flokit_server, app_id)["version"] == 1

    sign_in(page, flokit_server, db, workspace["workspace_id"])
    page.get_by_role("link", name="Experiments", exact=True).click()
    settle(page)
    page.get_by_role("link", name=PAYWALL).click()
    settle(page)
    expect(page.locator("h1")).to_have_text(f"Experiments of paywall {PAYWALL}")
    expect(page.locator("ol.audiences li").first).to_contain_text("Annual first (priority 0): everyone")
    expect(page.locator("ol.audiences li").nth(1)).to_contain_text("German prices (priority 0): country is DE")
    section = page.locator(f"#experiment-{rate.id}")
    expect(section.get_by_role("alert")).to_contain_text("Sample ratio mismatch")
    assert drawn(page, f"chart-{rate.id}") and drawn(page, f"chart-{revenue.id}")
    datasets = page.evaluate(
        "id => Chart.getChart(id).data.datasets.map(d => [d.label, d.data.length])", f"chart-{rate.id}"
    )
    assert datasets == [["control", 300], ["annual", 300]]
    # the revenue lift: an interval bar and its mean, both placed on the lift axis
    placed = page.evaluate(
        "id => Chart.getChart(id).data.datasets.map((d, i) => Chart.getChart(id).getDatasetMeta(i).data"
        ".map(e => Number.isFinite(e.x) && Number.isFinite(e.y)))",
        f"chart-{revenue.id}",
    )
    assert placed == [[True], [True]]
    assert_accessible(page)
    check_at_phone_width(page, "experiments")
    shoot(page, "experiments-paywall")

    # The dialog names the mismatch; Esc closes it and gives focus back to its trigger.
    trigger = section.get_by_role("button", name="Ship a variant")
    trigger.click()
    dialog = page.locator(f"dialog#dialog-ship-{rate.id}")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("button", name="Cancel")).to_be_focused()
    expect(dialog.locator(".srm-warning")).to_contain_text("p = ")
    assert_accessible(page)
    shoot(page, "experiments-ship-dialog")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(trigger).to_be_focused()

    # Not acknowledged: the browser keeps the form (nothing is sent, nothing changes).
    trigger.click()
    dialog.get_by_role("radio", name="annual").check()
    dialog.get_by_role("button", name="Ship a variant").click()
    expect(dialog).to_be_visible()
    assert dialog.locator("input[name=acknowledge_srm]").evaluate("box => !box.validity.valid")
    with db.read() as conn:
        assert repo.get(conn, workspace["workspace_id"], rate.id).status == "running"

    dialog.get_by_role("checkbox", name="I have read the sample ratio mismatch warning: ship anyway").check()
    dialog.get_by_role("button", name="Ship a variant").click()
    expect(page.locator(".success")).to_contain_text("Shipped annual of “Annual first”: paywall version 2 is live")
    expect(section.locator(".badge")).to_have_text("stopped — shipped annual")
    with db.read() as conn:
        live = configs.live(conn, app_id=app_id, paywall_id=PAYWALL)
    assert live is not None and live.published_by == "maya@example.com"
    deadline = time.monotonic() + 10  # each gateway worker keeps an answer for a second
    while (config := served(flokit_server, app_id))["version"] != 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    # user-42 sends no country: the German experiment does not take them, the shipped default does
    assert config["version"] == 2 and config["variant"]["variant_id"] == "annual"


def test_the_page_without_experiments_and_a_confirmation_page_without_javascript(
    page: Any, flokit_server: GunicornServer, db: Database, workspace: dict
) -> None:
    publish(db, workspace["app_id"])
    sign_in(page, flokit_server, db, workspace["workspace_id"])
    page.goto(f"{flokit_server.base}/dashboard/paywalls/{workspace['app_id']}/{PAYWALL}")
    page.get_by_role("link", name="Experiments of this paywall").click()
    settle(page)
    expect(page.locator("main")).to_contain_text("No experiment on this paywall yet")
    assert_accessible(page)
    check_at_phone_width(page, "experiments-empty")
    shoot(page, "experiments-paywall-empty")

    # The page a Start trigger leads to without JavaScript: the same form, then the experiment runs.
    draft = create(db, workspace, "Annual first", audience={"platform": ["ios"]})
    page.goto(f"{flokit_server.base}/dashboard/experiments/{draft.id}/start")
    confirm = page.locator("section.confirm")
    expect(confirm).to_contain_text("users who match its audience (platform is ios)")
    assert_accessible(page)
    shoot(page, "experiments-confirm-start")
    confirm.get_by_role("button", name="Start").click()
    expect(page.locator(".success")).to_contain_text("Started “Annual first”")
    with db.read() as conn:
        assert repo.get(conn, workspace["workspace_id"], draft.id).status == "running"
