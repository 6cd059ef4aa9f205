"""The Payback, Cohorts and Subscriptions pages in Debian's chromium, served by gunicorn on real reports.

The workspace's history is generated the way `flokit demo seed` generates it (1500 users over
70 days, tests/support/reports.py) and its reports built by one real refresh per module, served
by one gunicorn the module's tests share (they only read; each signs in with its own link). What
the charts were drawn with is read from the Chart.js instances themselves (`Chart.getChart(canvas)`)
and compared with `GET /v1/reports/...` for the same query.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.browser.demo_world import check_at_phone_width
from tests.browser.support import PageGuard, assert_accessible, flokit_env, shoot
from tests.support import ROOT, gunicorn_server
from warehouse.bootstrap import bootstrap
from warehouse.dashboard import sessions
from warehouse.db import Database, close_database, database_for, utcnow
from warehouse.settings import Settings
from warehouse.tables import workspaces
from warehouse.workspaces import create_key

WORKSPACE = "ws_dashbrowser"
RANGE = {"start_date": "2026-06-01", "end_date": "2026-07-31"}
COHORT_RANGE = {"cohort_start": "2026-06-10", "cohort_end": "2026-07-20"}
SUBSCRIPTION_CHARTS = {  # canvas id: (the v1 field drawn, or trial conversion computed from two)
    "chart-mrr": "mrr",
    "chart-churn": "churn_rate",
    "chart-conversion": "trial_conversion",
    "chart-refunds": "refund_rate",
}

# What a chart was drawn with: its labels and each dataset's label and data (a function, not a
# string predicate: the page's CSP forbids eval).
DRAWN = """canvas => {
  const chart = Chart.getChart(canvas);
  if (!chart) return null;
  return {
    labels: chart.data.labels,
    datasets: chart.data.datasets.map(d => ({label: d.label, data: d.data, type: d.type || chart.config.type,
                                             colour: d.borderColor, axis: d.yAxisID || null,
                                             dash: d.borderDash || null})),
  };
}"""
# Each cohort line's dash per segment, from its own `segment.borderDash` function.
DASHES = """canvas => Chart.getChart(canvas).data.datasets.map(d =>
  d.data.slice(1).map((_, i) => d.segment.borderDash({p0DataIndex: i, p1DataIndex: i + 1}) || null))"""


# Run in a child process: Dagster's in-process run, started while Playwright's event loop lives
# in this one, leaves an un-awaited `shutdown_asyncgens` coroutine behind (an error under -W error).
REFRESH = """
import sys
from pathlib import Path
import dagster as dg
from tests.support.money import reports_database
from tests.support.reports import refresh, seed_lake
data_dir, workspace = Path(sys.argv[1]), sys.argv[2]
seed_lake(data_dir, workspace, users=1500, days=70)
with dg.DagsterInstance.ephemeral() as instance:
    result = refresh(data_dir, reports_database(data_dir, workspace), instance)
    assert result is not None and result.success
"""


@pytest.fixture(scope="module")
def published_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Generated history and one real refresh for the module; each test serves a copy."""
    data_dir = tmp_path_factory.mktemp("browser_published")
    done = subprocess.run(
        [sys.executable, "-c", REFRESH, str(data_dir), WORKSPACE],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return data_dir


@pytest.fixture
def reports(request: pytest.FixtureRequest) -> str:
    """ "published" (the default): the refresh's output; "none": a data dir no refresh has run in."""
    return getattr(request, "param", "published")


@pytest.fixture(scope="module")
def published_key(module_settings: Settings, published_dir: Path) -> str:
    """The module's data directory (`module_settings`) holding the refresh's output, and the
    reports' workspace in its database; a read-only v1 key to it. The tests only read the reports,
    so they share this and one gunicorn (`module_server`); each signs in with a link of its own."""
    shutil.copytree(published_dir, module_settings.data_dir, dirs_exist_ok=True)
    with database_for(module_settings.database_url).write() as conn:
        conn.execute(
            workspaces.insert().values(
                id=WORKSPACE, name="Reports", reporting_currency="USD", timezone="UTC", created_at=utcnow()
            )
        )
        return create_key(conn, workspace_id=WORKSPACE, scope="read_only").api_key


@pytest.fixture
def settings(reports: str, request: pytest.FixtureRequest, tmp_path: Path, sqlite_template: Path) -> Settings:
    if reports == "published":
        settings: Settings = request.getfixturevalue("module_settings")
        return settings
    data_dir = tmp_path / "reports_data"
    data_dir.mkdir()
    shutil.copyfile(sqlite_template, data_dir / "flokit.db")
    url = f"sqlite:///{data_dir / 'flokit.db'}"
    return Settings(data_dir=data_dir, database_url=url, instance_key=secrets.token_urlsafe(32))


@pytest.fixture
def flokit_server(settings: Settings, reports: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """The module's one gunicorn on the published reports, or this test's own on an empty data dir."""
    if reports == "published":
        request.getfixturevalue("published_key")  # the reports are in place before anything is served
        yield request.getfixturevalue("module_server")
        return
    with gunicorn_server(flokit_env(settings), workers=2, log_dir=tmp_path) as server:
        yield server


@pytest.fixture
def operator(settings: Settings, reports: str, request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """The workspace to sign in to (the reports' own, or a fresh one), a one-time login path and a v1 key."""
    db: Database = database_for(settings.database_url)
    with db.write() as conn:
        if reports == "published":
            workspace_id, key = WORKSPACE, request.getfixturevalue("published_key")
        else:
            workspace_id = bootstrap(conn, name="Empty")["workspace_id"]
            key = create_key(conn, workspace_id=workspace_id, scope="read_only").api_key
        token = sessions.create_login_token(conn, operator="maya@example.com", workspace_id=workspace_id)
    yield {"login": f"/dashboard/login?token={token}", "key": key}
    if reports != "published":
        close_database(settings.database_url)


def v1(base: str, path: str, key: str, query: dict[str, str]) -> Any:
    assert base.startswith("http://127.0.0.1:")
    url = f"{base}/v1/reports/{path}?{urlencode(query)}"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})  # noqa: S310 (our server)
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        return json.loads(response.read())


def sign_in(page: Any, base: str, operator: dict[str, str]) -> None:
    """Through the one-time link, without loading a page: its confirmation page's form is posted
    as the Sign in button posts it, and the session cookie lands in the page's context. (Loading
    the link as a page and leaving at once aborts that page's favicon request, which the guard
    counts as a failed request; test_dashboard_actions.py presses the button itself.)"""
    shown = page.request.get(base + operator["login"])
    assert shown.status == 200, shown.status
    form: dict[str, str] = {}
    for name in ("csrf_token", "token"):
        found = re.search(rf'name="{name}" value="([^"]+)"', shown.text())
        assert found is not None, f"no {name} field on the sign-in page"
        form[name] = found.group(1)
    response = page.request.post(base + "/dashboard/login", form=form)
    assert response.ok and response.url.startswith(base + "/dashboard/"), response.url


def open_page(page: Any, base: str, operator: dict[str, str], path: str) -> None:
    sign_in(page, base, operator)
    page.goto(base + path)


def test_payback_charts_are_drawn_with_v1s_figures(page: Any, flokit_server: Any, operator: dict[str, str]) -> None:
    from playwright.sync_api import expect

    base = flokit_server.base
    open_page(page, base, operator, "/dashboard/payback?" + urlencode(RANGE))
    expect(page.get_by_role("heading", level=1)).to_have_text("Payback")
    rows = v1(base, "payback", operator["key"], RANGE)["data"]
    assert len(rows) == 6

    payback = page.evaluate(DRAWN, page.locator("#chart-payback").element_handle())
    assert payback == {
        "labels": [r["cohort"] for r in rows],
        "datasets": [
            {
                "label": "ROAS 30d",
                "data": [r["roas_30d"] for r in rows],
                "type": "bar",
                "colour": "#0072B2",
                "axis": "y",
                "dash": None,
            },
            {
                "label": "Payback day",
                "data": [r["payback_days"] for r in rows],
                "type": "line",
                "colour": "#D55E00",
                "axis": "y1",
                "dash": None,
            },
        ],
    }
    cac = page.evaluate(DRAWN, page.locator("#chart-cac").element_handle())
    assert cac["labels"] == [r["cohort"] for r in rows]
    assert cac["datasets"] == [
        {
            "label": "CAC (USD)",
            "data": [r["cac"] for r in rows],
            "type": "bar",
            "colour": "#009E73",
            "axis": None,
            "dash": None,
        }
    ]
    # Drawn, not just created: the canvas has a size and the browser painted something on it.
    assert page.evaluate("c => c.width > 300 && c.height > 100", page.locator("#chart-payback").element_handle())

    table = page.locator("#payback-table tbody tr")
    expect(table).to_have_count(len(rows))
    expect(page.locator("#payback-table tbody th")).to_have_text([r["cohort"] for r in rows])
    expect(page.locator("#chart-payback")).to_have_attribute("role", "img")
    label = page.locator("#chart-payback").get_attribute("aria-label") or ""
    assert label.startswith("ROAS at 30 days (bars) and payback day (line) for 6 campaigns.")
    expect(page.locator(".as-of time")).to_have_attribute(
        "datetime", v1(base, "payback", operator["key"], RANGE)["meta"]["generated_at"]
    )

    assert_accessible(page)
    shoot(page, "reports-payback")

    with page.expect_download() as download:
        page.get_by_role("link", name="Download these figures as CSV").click()
    saved = Path(download.value.path()).read_text(encoding="utf-8")
    parsed = list(csv.DictReader(io.StringIO(saved)))
    assert [row["cohort"] for row in parsed] == [r["cohort"] for r in rows]
    assert [row["roas_30d"] for row in parsed] == ["" if r["roas_30d"] is None else str(r["roas_30d"]) for r in rows]


def test_the_filter_form_regroups_the_chart(page: Any, flokit_server: Any, operator: dict[str, str]) -> None:
    from playwright.sync_api import expect

    base = flokit_server.base
    open_page(page, base, operator, "/dashboard/payback?" + urlencode(RANGE))
    page.get_by_label("Group by").select_option("country")
    page.get_by_label("Window (days)").fill("60")
    page.get_by_role("button", name="Show").click()
    expect(page).to_have_url(
        f"{base}/dashboard/payback?start_date=2026-06-01&end_date=2026-07-31&group_by=country&cohort_window_days=60"
    )
    # The address changes when the new page commits, before its script has drawn the chart: wait
    # for the chart itself (run 22 read the canvas in between and found no chart yet).
    page.wait_for_function("() => window.Chart && Chart.getChart(document.querySelector('#chart-payback'))")
    rows = v1(base, "payback", operator["key"], {**RANGE, "group_by": "country", "cohort_window_days": "60"})["data"]
    drawn = page.evaluate(DRAWN, page.locator("#chart-payback").element_handle())
    assert drawn["labels"] == [r["cohort"] for r in rows] and set(drawn["labels"]) == {
        "US",
        "GB",
        "DE",
        "FR",
        "BR",
        "JP",
    }
    assert drawn["datasets"][1]["data"] == [r["payback_days"] for r in rows]

    # The grouping with the most groups: the CAC chart grows to keep one readable bar per group.
    creative = {**RANGE, "group_by": "creative"}
    page.goto(f"{base}/dashboard/payback?" + urlencode(creative))
    rows = v1(base, "payback", operator["key"], creative)["data"]
    assert len(rows) > 6
    drawn = page.evaluate(DRAWN, page.locator("#chart-cac").element_handle())
    assert drawn["labels"] == [r["cohort"] for r in rows]
    assert drawn["datasets"][0]["data"] == [r["cac"] for r in rows]
    box = page.locator("#chart-cac").bounding_box()
    assert box is not None and box["height"] >= 20 * len(rows)
    shoot(page, "reports-payback-creative")

    page.get_by_role("link", name="Clear filters").click()
    expect(page).to_have_url(f"{base}/dashboard/payback")
    expect(page.locator("#chart-payback")).to_be_visible()


def test_a_refused_range_is_shown_beside_its_field(
    browser_context: tuple[Any, PageGuard], flokit_server: Any, operator: dict[str, str]
) -> None:
    """Unguarded context: the page answers 400 (v1 refuses the query), which the guard counts as a
    console error; it must be the only problem."""
    from playwright.sync_api import expect

    context, guard = browser_context
    page = context.new_page()
    base = flokit_server.base
    open_page(page, base, operator, "/dashboard/payback?" + urlencode(RANGE))
    page.get_by_label("Installed to").fill("2026-05-01")
    page.get_by_role("button", name="Show").click()
    expect(page.locator("#error-end_date")).to_have_text("must not be before the first day (start_date)")
    expect(page.get_by_label("Installed to")).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_label("Installed to")).to_have_value("2026-05-01")
    expect(page.locator("canvas")).to_have_count(0)
    assert_accessible(page)
    shoot(page, "reports-payback-invalid")
    page.wait_for_load_state("networkidle")
    context.close()
    assert [p.split(" (at ")[0] for p in guard.problems] == [
        "console error: Failed to load resource: the server responded with a status of 400 (BAD REQUEST)"
    ], guard.report()


def test_cohort_curves_are_drawn_with_v1s_figures_and_dashed_tails(
    page: Any, flokit_server: Any, operator: dict[str, str]
) -> None:
    from playwright.sync_api import expect

    base = flokit_server.base
    open_page(page, base, operator, "/dashboard/cohorts?" + urlencode(COHORT_RANGE))
    expect(page.get_by_role("heading", level=1)).to_have_text("Cohorts")
    curves = v1(base, "cohorts", operator["key"], COHORT_RANGE)["cohorts"]
    assert curves

    retention = page.evaluate(DRAWN, page.locator("#chart-retention").element_handle())
    revenue = page.evaluate(DRAWN, page.locator("#chart-revenue").element_handle())
    longest = max(len(c["weeks"]) for c in curves)
    assert retention["labels"] == revenue["labels"] == [f"Week {w}" for w in range(longest)]
    assert [d["label"] for d in retention["datasets"]] == [c["label"] for c in curves]
    assert [d["data"] for d in retention["datasets"]] == [[w["retained_pct"] for w in c["weeks"]] for c in curves]
    assert [d["data"] for d in revenue["datasets"]] == [[w["cumulative_revenue"] for w in c["weeks"]] for c in curves]
    palette = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#F0E442", "#000000"]
    assert [d["colour"] for d in retention["datasets"]] == [palette[i % 8] for i in range(len(curves))]

    # Dashed exactly from the first week estimated from fewer users than week 0 (younger cohorts
    # in the range have not reached it): v1's `users`, drawn by Chart.js's segment styling.
    dashes = page.evaluate(DASHES, page.locator("#chart-retention").element_handle())
    for curve, drawn in zip(curves, dashes, strict=True):
        users = [w["users"] for w in curve["weeks"]]
        expected = [[6, 4] if users[i + 1] < users[0] else None for i in range(len(users) - 1)]
        assert drawn == expected, curve["label"]
    assert any(any(d is not None for d in drawn) for drawn in dashes)
    assert any(d is None for d in dashes[0]), "the early weeks stay solid"

    expect(page.locator("#cohorts-table tbody tr")).to_have_count(sum(len(c["weeks"]) for c in curves))
    expect(page.locator("#cohort-key")).to_contain_text("Dashed: weeks only the older cohorts have reached")
    assert_accessible(page)
    shoot(page, "reports-cohorts")


@pytest.mark.parametrize("reports", ["none"], indirect=True)
def test_before_the_first_refresh_both_pages_say_what_to_do(
    page: Any, flokit_server: Any, operator: dict[str, str]
) -> None:
    from playwright.sync_api import expect

    base = flokit_server.base
    sign_in(page, base, operator)
    page.goto(base + "/dashboard/actions")
    for name in ("payback", "cohorts", "subscriptions"):
        page.wait_for_load_state("networkidle")  # the previous page's favicon has arrived
        page.get_by_role("link", name=name.capitalize()).click()
        expect(page).to_have_url(f"{base}/dashboard/{name}")
        expect(page.get_by_role("heading", name="No reports yet")).to_be_visible()
        expect(page.locator("main")).to_contain_text("flokit refresh")
        expect(page.locator("canvas")).to_have_count(0)
        assert page.evaluate("() => typeof window.Chart") == "undefined"  # not even loaded
        assert_accessible(page)
        shoot(page, f"reports-{name}-empty")


def test_filters_without_rows_offer_to_clear_them(page: Any, flokit_server: Any, operator: dict[str, str]) -> None:
    from playwright.sync_api import expect

    base = flokit_server.base
    sign_in(page, base, operator)  # once: the link is single-use
    for name, query in (
        ("payback", {"start_date": "2020-01-01", "end_date": "2020-01-31"}),
        ("cohorts", {"cohort_start": "2020-01-01", "cohort_end": "2020-01-31"}),
    ):
        page.goto(f"{base}/dashboard/{name}?" + urlencode(query))
        expect(page.get_by_role("heading", level=2)).to_contain_text("for these filters")
        assert_accessible(page)
        shoot(page, f"reports-{name}-no-rows")
        page.locator("section.empty").get_by_role("link", name="Clear filters").click()
        expect(page.locator(f"#chart-{'payback' if name == 'payback' else 'retention'}")).to_be_visible()
        page.wait_for_load_state("networkidle")


def conversion(row: dict[str, Any]) -> float | None:
    return row["trial_conversions"] / row["new_trials"] if row["new_trials"] else None


def test_subscription_charts_are_drawn_with_v1s_figures(
    page: Any, flokit_server: Any, operator: dict[str, str]
) -> None:
    from playwright.sync_api import expect

    base = flokit_server.base
    query = {**RANGE, "interval": "week"}
    open_page(page, base, operator, "/dashboard/subscriptions?" + urlencode(query))
    expect(page.get_by_role("heading", level=1)).to_have_text("Subscriptions")
    answer = v1(base, "subscriptions", operator["key"], query)
    rows = answer["data"]
    assert len(rows) == 9 and rows[-1]["active_subscriptions"] > 0  # weeks from Monday 2026-06-01
    weeks = [r["period_start"] for r in rows]

    for canvas, field in SUBSCRIPTION_CHARTS.items():
        drawn = page.evaluate(DRAWN, page.locator(f"#{canvas}").element_handle())
        values = [conversion(r) for r in rows] if field == "trial_conversion" else [r[field] for r in rows]
        assert drawn == {
            "labels": weeks,
            "datasets": [
                {"label": "All", "data": values, "type": "line", "colour": "#0072B2", "axis": None, "dash": None}
            ],
        }, canvas
        # Drawn, not just created: the canvas has a size.
        assert page.evaluate("c => c.width > 300 && c.height > 100", page.locator(f"#{canvas}").element_handle())
    actives = page.evaluate(DRAWN, page.locator("#chart-actives").element_handle())
    assert [(d["label"], d["data"], d["dash"]) for d in actives["datasets"]] == [
        ("All · subscriptions", [r["active_subscriptions"] for r in rows], None),
        ("All · trials", [r["active_trials"] for r in rows], [6, 4]),
    ]
    label = page.locator("#chart-mrr").get_attribute("aria-label") or ""
    assert label.startswith("MRR in USD by week, 9 periods from 2026-06-01 to 2026-07-27:"), label
    assert label.endswith("Every figure is in the table below.")

    # Each definition is one click away, closed until then.
    definition = page.locator("details.definition").filter(has_text="Definition of trial conversion")
    expect(definition.locator("p")).not_to_be_visible()
    definition.get_by_text("Definition of trial conversion").click()
    expect(definition).to_have_attribute("open", "")
    expect(definition.locator("p")).to_be_visible()
    expect(definition.locator("p")).to_contain_text("trial_conversions / new_trials")
    expect(page.locator("details.definition[open]")).to_have_count(1)

    expect(page.locator("#subscriptions-table tbody tr")).to_have_count(len(rows))
    expect(page.locator("#subscriptions-table tbody th")).to_have_text(weeks)
    expect(page.locator(".as-of time")).to_have_attribute("datetime", answer["meta"]["generated_at"])

    assert_accessible(page)
    check_at_phone_width(page, "/dashboard/subscriptions")  # no overflow at 390 px, axe again
    shoot(page, "reports-subscriptions")  # no table needs a sideways scroll at 1280 px

    with page.expect_download() as download:
        page.get_by_role("link", name="Download these figures as CSV").click()
    parsed = list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text(encoding="utf-8"))))
    assert [row["period_start"] for row in parsed] == weeks
    assert [row["mrr"] for row in parsed] == [str(r["mrr"]) for r in rows]


def test_subscription_charts_by_group_draw_one_line_per_group(
    page: Any, flokit_server: Any, operator: dict[str, str]
) -> None:
    from playwright.sync_api import expect

    base = flokit_server.base
    open_page(page, base, operator, "/dashboard/subscriptions?" + urlencode({**RANGE, "interval": "week"}))
    page.get_by_label("Group by").select_option("product")
    page.get_by_label("Interval").select_option("day")
    page.get_by_role("button", name="Show").click()
    expect(page).to_have_url(
        f"{base}/dashboard/subscriptions?start_date=2026-06-01&end_date=2026-07-31&interval=day&group_by=product"
    )
    page.wait_for_function("() => window.Chart && Chart.getChart(document.querySelector('#chart-refunds'))")
    rows = v1(base, "subscriptions", operator["key"], {**RANGE, "group_by": "product"})["data"]
    products = {r["group"] for r in rows}
    assert len(products) == 3

    mrr = page.evaluate(DRAWN, page.locator("#chart-mrr").element_handle())
    assert len(mrr["labels"]) == 61 and {d["label"] for d in mrr["datasets"]} == products
    last = [d["data"][-1] for d in mrr["datasets"]]
    assert last == sorted(last, reverse=True)  # the heaviest product first
    for d in mrr["datasets"]:
        assert d["data"] == [r["mrr"] for r in rows if r["group"] == d["label"]]
    actives = page.evaluate(DRAWN, page.locator("#chart-actives").element_handle())
    assert [d["label"] for d in actives["datasets"]] == [
        f"{d['label']} · {what}" for d in mrr["datasets"] for what in ("subscriptions", "trials")
    ]
    assert [d["dash"] for d in actives["datasets"]] == [None, [6, 4]] * 3

    expect(page.locator("#subscriptions-table tbody tr")).to_have_count(len(rows))
    assert_accessible(page)
    check_at_phone_width(page, "/dashboard/subscriptions")
    shoot(page, "reports-subscriptions-product")
