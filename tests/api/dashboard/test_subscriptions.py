"""The dashboard's Subscriptions page and its CSV over HTTP, against a real refresh.

What the page shows is compared with what `GET /v1/reports/subscriptions` answers for the same
query, read with a read-only key of the same workspace: the chart data block, the table and the
CSV carry v1's figures (one computation, two surfaces). The reports come from one real refresh
per module (tests/support/reports.py: 1500 generated users over 70 days from 2026-06-01), copied
into each test's data directory.
"""

from __future__ import annotations

import html
import re
import secrets
import shutil
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from flask.testing import FlaskClient

from api.app import create_app
from tests.support.dashboard import sign_in
from tests.support.money import reports_database
from tests.support.report_pages import cell, csv_rows, data_block, money, percent, table_rows, text, v1
from tests.support.reports import refresh, seed_lake
from warehouse.bootstrap import bootstrap
from warehouse.db import Database, database_for, utcnow
from warehouse.settings import Settings
from warehouse.tables import workspaces
from warehouse.workspaces import create_key

WORKSPACE = "ws_dashsubs"
RANGE = {"start_date": "2026-06-01", "end_date": "2026-07-31"}
COLUMNS = (
    "period_start,group,active_subscriptions,active_trials,mrr,arr,new_subscriptions,new_trials,trial_conversions,"
    "reactivations,churned_subscriptions,churn_rate,refunds,refund_rate,gross_revenue,net_revenue"
)


@pytest.fixture(scope="module")
def published_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real refresh per module (it takes seconds); each test gets a copy of its output."""
    data_dir = tmp_path_factory.mktemp("dash_subscriptions")
    seed_lake(data_dir, WORKSPACE, users=1500, days=70)
    with dg.DagsterInstance.ephemeral() as instance:
        result = refresh(data_dir, reports_database(data_dir, WORKSPACE), instance)
        assert result is not None and result.success
    return data_dir


@pytest.fixture
def settings(database_url: str, tmp_path: Path, published_dir: Path) -> Settings:
    data_dir = tmp_path / "reports_data"
    shutil.copytree(published_dir, data_dir)
    return Settings(data_dir=data_dir, database_url=database_url, instance_key=secrets.token_urlsafe(32))


@pytest.fixture
def published(db: Database) -> dict[str, str]:
    """The workspace the reports belong to, with a read-only v1 key to compare against."""
    with db.write() as conn:
        conn.execute(
            workspaces.insert().values(
                id=WORKSPACE, name="Subscriptions", reporting_currency="USD", timezone="UTC", created_at=utcnow()
            )
        )
        key = create_key(conn, workspace_id=WORKSPACE, scope="read_only").api_key
    return {"workspace_id": WORKSPACE, "key": key}


@pytest.fixture
def signed_in(client: FlaskClient, db: Database, published: dict[str, str]) -> FlaskClient:
    return sign_in(client, db, WORKSPACE)


def count(value: int) -> str:
    return f"{value:,}"


def conversion(row: dict[str, Any]) -> float | None:
    return row["trial_conversions"] / row["new_trials"] if row["new_trials"] else None


def rate(value: float | None) -> str:
    return "—" if value is None else percent(value)


@pytest.mark.parametrize(
    ("interval", "group_by"), [("day", "none"), ("week", "product"), ("month", "country"), ("week", "store")]
)
def test_the_page_and_its_csv_carry_v1s_figures(
    signed_in: FlaskClient, published: dict[str, str], interval: str, group_by: str
) -> None:
    query = {**RANGE, "interval": interval, "group_by": group_by}
    expected = v1(signed_in, "subscriptions", published["key"], query)
    rows = expected["data"]
    assert rows and any(r["active_subscriptions"] for r in rows), "the refresh left no subscriptions to compare"

    response = signed_in.get("/dashboard/subscriptions", query_string=query)
    assert response.status_code == 200
    page = response.get_data(as_text=True)

    # The charts: every period, one series per group (every group here: at most 6), each v1's values.
    chart = data_block(page, "subscriptions-data")
    periods = sorted({r["period_start"] for r in rows})
    assert chart["labels"] == periods and chart["currency"] == "USD"
    groups = {r["group"] for r in rows}
    assert len(chart["series"]) == len(groups) <= 8
    for series in chart["series"]:
        group = None if group_by == "none" else series["label"]
        mine = sorted((r for r in rows if r["group"] == group), key=lambda r: r["period_start"])
        assert len(mine) == len(periods)
        for field in ("mrr", "active_subscriptions", "active_trials", "churn_rate", "refund_rate"):
            assert series[field] == [r[field] for r in mine], (series["label"], field)
        assert series["trial_conversion"] == [conversion(r) for r in mine]
    if group_by == "none":
        assert [s["label"] for s in chart["series"]] == ["All"]
    else:  # heaviest first: by MRR in the last period
        last = [s["mrr"][-1] for s in chart["series"]]
        assert last == sorted(last, reverse=True)

    # The table: every row of v1's answer, in v1's order, every figure.
    table = table_rows(page, "subscriptions-table")
    assert len(table) == len(rows)
    for t, r in zip(table, rows, strict=True):
        group = [] if group_by == "none" else [r["group"]]
        assert t == [
            r["period_start"],
            *group,
            count(r["active_subscriptions"]),
            count(r["active_trials"]),
            money(r["mrr"]),
            money(r["arr"]),
            count(r["new_subscriptions"]),
            count(r["new_trials"]),
            count(r["trial_conversions"]),
            rate(conversion(r)),
            count(r["reactivations"]),
            count(r["churned_subscriptions"]),
            rate(r["churn_rate"]),
            count(r["refunds"]),
            rate(r["refund_rate"]),
            money(r["gross_revenue"]),
            money(r["net_revenue"]),
        ]
    generated = expected["meta"]["generated_at"]
    assert f'<time datetime="{generated}">{generated[:10]} {generated[11:16]} UTC</time>' in page

    # The CSV behind the page's link: v1's columns and values.
    link = re.search(r'<a href="([^"]+)" download>Download these figures as CSV</a>', page)
    assert link
    csv_response = signed_in.get(html.unescape(link.group(1)))
    assert csv_response.status_code == 200 and csv_response.mimetype == "text/csv"
    assert (
        f"subscriptions-{interval}-{group_by}-2026-06-01-2026-07-31.csv" in csv_response.headers["Content-Disposition"]
    )
    body = csv_response.get_data(as_text=True)
    assert body.splitlines()[0] == COLUMNS
    assert csv_rows(body) == [{k: cell(v) for k, v in r.items()} for r in rows]


def test_every_chart_has_a_summary_a_definition_and_no_inline_script(signed_in: FlaskClient) -> None:
    page = signed_in.get("/dashboard/subscriptions", query_string={**RANGE, "interval": "week"}).get_data(as_text=True)
    canvases = re.findall(r"<canvas ([^>]*)>", page)
    kinds = [re.search(r'data-chart="([^"]+)"', a).group(1) for a in canvases]  # type: ignore[union-attr]
    assert kinds == [
        "subscriptions-mrr",
        "subscriptions-actives",
        "subscriptions-churn",
        "subscriptions-conversion",
        "subscriptions-refunds",
    ]
    for attrs in canvases:
        assert 'role="img"' in attrs
        label = html.unescape(re.search(r'aria-label="([^"]*)"', attrs).group(1))  # type: ignore[union-attr]
        assert "periods from 2026-06-01 to 2026-07-27" in label and label.endswith("table below."), label
    summaries = [html.unescape(re.search(r'aria-label="([^"]*)"', a).group(1)) for a in canvases]  # type: ignore[union-attr]
    assert summaries[0].startswith("MRR in USD by week, 9 periods from 2026-06-01 to 2026-07-27:")
    assert "Active subscriptions by week" in summaries[1] and "Active trials by week" in summaries[1]
    definitions = re.findall(r"<details class=\"definition\">\s*<summary>([^<]+)</summary>\s*<p>(.*?)</p>", page, re.S)
    assert [d[0] for d in definitions] == [
        "Definition of MRR",
        "Definition of active subscriptions and active trials",
        "Definition of churn rate",
        "Definition of trial conversion",
        "Definition of refund rate",
    ]
    assert "trial_conversions / new_trials" in definitions[3][1] and "no trial started" in definitions[3][1]
    assert "1 year \N{MULTIPLICATION SIGN}1/12" in definitions[0][1] and "can exceed 100 %" in definitions[2][1]
    scripts = re.findall(r"<script([^>]*)>", page)
    assert all("src=" in s or 'type="application/json"' in s for s in scripts), scripts
    assert "chart-4.6.1.umd.min.js" in page and "reports.js" in page and "reports.css" in page
    assert 'aria-current="page">Subscriptions<' in page
    assert "Data as of" in page


def test_without_dates_the_page_shows_the_90_days_ending_on_the_reports_day(
    signed_in: FlaskClient, published: dict[str, str]
) -> None:
    page = signed_in.get("/dashboard/subscriptions").get_data(as_text=True)
    start = re.search(r'id="filter-start_date" name="start_date" type="date" value="([^"]+)"', page)
    end = re.search(r'id="filter-end_date" name="end_date" type="date" value="([^"]+)"', page)
    assert start and end
    first, last = date.fromisoformat(start.group(1)), date.fromisoformat(end.group(1))
    assert last - first == timedelta(days=89)
    expected = v1(signed_in, "subscriptions", published["key"], {"start_date": str(first), "end_date": str(last)})
    assert last.isoformat() == expected["meta"]["generated_at"][:10]  # the state the reports hold
    assert expected["meta"]["interval"] == "day" and expected["meta"]["group_by"] == "none"
    chart = data_block(page, "subscriptions-data")
    assert chart["labels"] == [r["period_start"] for r in expected["data"]]
    assert chart["series"][0]["mrr"] == [r["mrr"] for r in expected["data"]]
    assert re.search(r'<option value="day" selected>Day</option>', page)
    assert re.search(r'<option value="none" selected>None</option>', page)
    assert "Clear filters" not in page


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        ({"start_date": "2026/06/01", "end_date": "2026-06-30"}, "start_date", "must be a date as YYYY-MM-DD"),
        ({"start_date": "2026-02-30", "end_date": "2026-06-30"}, "start_date", "must be a real calendar date"),
        ({"start_date": "2026-06-30", "end_date": "2026-06-01"}, "end_date", "must not be before start_date"),
        ({"start_date": "2023-01-01", "end_date": "2026-01-02"}, "end_date", "at most 3 years after start_date"),
        ({**RANGE, "interval": "year"}, "interval", "Input should be 'day', 'week' or 'month'"),
        ({**RANGE, "group_by": "creative"}, "group_by", "Input should be"),
        ({"start_date": "2026-06-01"}, "end_date", "Field required"),
    ],
)
def test_invalid_filters_are_shown_beside_their_field(
    signed_in: FlaskClient, published: dict[str, str], query: dict[str, str], field: str, message: str
) -> None:
    response = signed_in.get("/dashboard/subscriptions", query_string=query)
    assert response.status_code == 400 and response.mimetype == "text/html"
    page = response.get_data(as_text=True)
    assert re.search(rf'id="filter-{field}"[^>]*aria-invalid="true" aria-describedby="error-{field}"', page), page
    error = re.search(rf'<small id="error-{field}" class="field-error">([^<]*)</small>', page)
    assert error and message in html.unescape(error.group(1))
    assert "Correct the highlighted field" in page and "<canvas" not in page
    for name, value in query.items():  # what was typed stays in the form
        if name not in ("group_by", "interval"):
            assert f'name="{name}" type=' in page and f'value="{html.escape(value)}"' in page
    # v1 refuses the same query with the same words.
    refused = signed_in.get(
        "/v1/reports/subscriptions", query_string=query, headers={"Authorization": f"Bearer {published['key']}"}
    )
    assert refused.status_code == 400 and f"'{field}'" in refused.json["message"]

    csv_response = signed_in.get("/dashboard/subscriptions.csv", query_string=query)
    assert csv_response.status_code == 400 and csv_response.mimetype == "text/html"
    assert f"Invalid query parameter &#39;{field}&#39;" in csv_response.get_data(as_text=True)


def test_days_after_the_reports_day_have_no_figures_yet(signed_in: FlaskClient, published: dict[str, str]) -> None:
    generated = v1(signed_in, "subscriptions", published["key"], RANGE)["meta"]["generated_at"]
    later = date.fromisoformat(generated[:10]) + timedelta(days=1)
    query = {"start_date": str(later), "end_date": str(later + timedelta(days=30))}
    response = signed_in.get("/dashboard/subscriptions", query_string=query)
    assert response.status_code == 200
    body = response.get_data(as_text=True)
    assert "No subscription figures for these filters" in body and "a later day has no state yet" in body
    assert '<a href="/dashboard/subscriptions">Clear filters</a> to see the last 90 days.' in body
    assert "Data as of" in body and "<canvas" not in body and "chart-4.6.1" not in body
    assert signed_in.get("/dashboard/subscriptions.csv", query_string=query).get_data(as_text=True) == COLUMNS + "\n"


def test_a_grouping_with_no_group_in_the_range_says_so(signed_in: FlaskClient, published: dict[str, str]) -> None:
    query = {"start_date": "2020-01-01", "end_date": "2020-01-31", "group_by": "campaign"}
    assert v1(signed_in, "subscriptions", published["key"], query)["data"] == []
    body = text(signed_in.get("/dashboard/subscriptions", query_string=query).get_data(as_text=True))
    assert "No subscription figures for these filters" in body
    assert "No campaign has subscription figures from 2020-01-01 to 2020-01-31." in body
    assert "later day has no state yet" not in body


def test_another_workspace_sees_none_of_these_figures(
    client: FlaskClient, db: Database, published: dict[str, str]
) -> None:
    with db.write() as conn:
        other = bootstrap(conn, name="Other")
    sign_in(client, db, other["workspace_id"])
    page = client.get("/dashboard/subscriptions", query_string=RANGE).get_data(as_text=True)
    chart = data_block(page, "subscriptions-data")
    assert len(chart["labels"]) == 61 and not any(chart["series"][0]["mrr"])
    assert not any(chart["series"][0]["active_subscriptions"])
    rows = csv_rows(client.get("/dashboard/subscriptions.csv", query_string=RANGE).get_data(as_text=True))
    assert len(rows) == 61 and {r["active_subscriptions"] for r in rows} == {"0"}


@pytest.mark.parametrize("path", ["/dashboard/subscriptions", "/dashboard/subscriptions.csv"])
def test_the_page_needs_a_signed_in_operator(client: FlaskClient, path: str) -> None:
    response = client.get(path, query_string=RANGE)
    assert response.status_code == 401 and response.mimetype == "text/html"
    assert "flokit admin login-link" in response.get_data(as_text=True)


def test_before_the_first_refresh_the_page_says_how_to_build_reports(database_url: str, tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "empty", database_url=database_url, instance_key=secrets.token_urlsafe(32))
    db = database_for(database_url)
    with db.write() as conn:
        ws = bootstrap(conn, name="Empty")
    client = sign_in(create_app(settings).test_client(), db, ws["workspace_id"])
    response = client.get("/dashboard/subscriptions")
    assert response.status_code == 200
    page = response.get_data(as_text=True)
    body = text(page)
    assert "No reports yet" in body and "flokit refresh" in body and "six-hourly refresh" in body
    assert "Data as of" not in body and "Clear filters" not in body and "<canvas" not in page
    today = datetime.now(UTC).date()  # no reports: the 90 days ending today (UTC)
    assert f'name="end_date" type="date" value="{today}"' in page
    assert f'name="start_date" type="date" value="{today - timedelta(days=89)}"' in page
    assert client.get("/dashboard/subscriptions.csv").get_data(as_text=True) == COLUMNS + "\n"


def test_the_cards_show_v1s_live_overview(client: FlaskClient, db: Database, settings: Settings) -> None:
    """A purchase a billing system states through the generic webhook is on the cards at once, with
    v1's figures (one computation); the 28-day flows are the last refresh's, and say so."""
    from tests.support.notifications import SUBSCRIPTION, iso, post
    from warehouse.entitlements.stores import StoresUpdate, set_stores

    with db.write() as conn:
        made = bootstrap(conn, name="Live")
        secret = set_stores(
            conn,
            app_id=made["app_id"],
            update=StoresUpdate(new_generic_secret=True),
            instance_key=settings.instance_key,
        ).generic_secret
    assert secret is not None
    now = datetime.now(UTC)
    body = {
        "id": "evt_1", "type": "purchase", "user_id": "u1", "purchase_id": "sub_1", "product_id": "pro_weekly",
        "channel": "iap", "occurred_at": iso(now - timedelta(minutes=1)), "expires_at": iso(now + timedelta(days=7)),
        "billing_period": "weekly", "revenue": 4.99, "currency": "USD",
    }  # fmt: skip
    assert post(client, SUBSCRIPTION, made["app_id"], body, secret).json["status"] == "applied"
    expected = client.get(
        "/v1/subscriptions/overview", headers={"Authorization": f"Bearer {made['api_key_read_only']}"}
    ).json
    assert (expected["active_subscriptions"], expected["mrr"]) == (1, 19.96)
    page = sign_in(client, db, made["workspace_id"]).get("/dashboard/subscriptions").get_data(as_text=True)
    cards = dict(re.findall(r"<div><dt>([^<]+)</dt><dd>([^<]+)</dd></div>", page))
    assert cards == {
        "Active subscriptions": "1",
        "Active trials": "0",
        "MRR (USD)": money(expected["mrr"]),
        "ARR (USD)": money(expected["arr"]),
        "Net revenue, last 28 days": money(0),
        "New customers, last 28 days": "0",
    }
    assert (
        f"revenue and new customers as of the last refresh, {expected['flows_as_of'][:16].replace('T', ' ')} UTC"
        in page
    )
