"""The dashboard's Payback and Cohorts pages and their CSVs over HTTP, against a real refresh.

What a page shows is compared with what `GET /v1/reports/...` answers for the same query, read
with an API key of the same workspace: the chart data block, the table and the CSV must carry
v1's figures (one computation, two surfaces). The reports come from one real refresh per module
(tests/support/reports.py: 1500 generated users over 70 days), copied into each test's data dir.
"""

from __future__ import annotations

import html
import re
import secrets
import shutil
from datetime import date
from pathlib import Path

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

WORKSPACE = "ws_dashreports"
RANGE = {"start_date": "2026-06-01", "end_date": "2026-07-31"}
COHORT_RANGE = {"cohort_start": "2026-06-10", "cohort_end": "2026-07-20"}
GROUPINGS = ("campaign", "creative", "country", "offer", "paywall")


@pytest.fixture(scope="module")
def published_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real refresh per module (it takes seconds); each test gets a copy of its output."""
    data_dir = tmp_path_factory.mktemp("dash_published")
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
                id=WORKSPACE, name="Reports", reporting_currency="USD", timezone="UTC", created_at=utcnow()
            )
        )
        key = create_key(conn, workspace_id=WORKSPACE, scope="read_only").api_key
    return {"workspace_id": WORKSPACE, "key": key}


@pytest.fixture
def signed_in(client: FlaskClient, db: Database, published: dict[str, str]) -> FlaskClient:
    return sign_in(client, db, WORKSPACE)


@pytest.mark.parametrize("group_by", GROUPINGS)
def test_payback_page_and_csv_carry_v1s_figures(
    signed_in: FlaskClient, published: dict[str, str], group_by: str
) -> None:
    query = {**RANGE, "group_by": group_by, "cohort_window_days": "45"}
    expected = v1(signed_in, "payback", published["key"], query)
    rows = expected["data"]
    assert rows, "the refresh left no payback rows to compare"

    response = signed_in.get("/dashboard/payback", query_string=query)
    assert response.status_code == 200
    page = response.get_data(as_text=True)
    chart = data_block(page, "payback-data")
    assert chart["labels"] == [r["cohort"] for r in rows]
    assert chart["roas_30d"] == [r["roas_30d"] for r in rows]
    assert chart["payback_days"] == [r["payback_days"] for r in rows]
    assert chart["cac"] == [r["cac"] for r in rows]
    assert chart["window"] == 45 and chart["currency"] == "USD"

    table = table_rows(page, "payback-table")
    assert [t[0] for t in table] == [r["cohort"] for r in rows]
    for t, r in zip(table, rows, strict=True):
        assert t[1] == money(r["spend"]) and t[2] == money(r["cac"])
        assert t[3] == str(r["trials"]) and t[4] == percent(r["trial_conversion_rate"])
        assert t[5] == str(r["subscriptions"])
        assert t[6] == (percent(r["roas_30d"]) if r["roas_30d"] is not None else "no spend")
        if r["payback_days"] is not None:
            assert t[7] == f"day {r['payback_days']}"
        else:
            assert t[7] in ("no spend", "not within 45 days")
        assert t[8] == money(r["ltv_projected"])
    generated = expected["meta"]["generated_at"]
    assert f'<time datetime="{generated}">{generated[:10]} {generated[11:16]} UTC</time>' in page
    assert "Data as of" in page

    link = re.search(r'<a href="([^"]+)" download>Download these figures as CSV</a>', page)
    assert link
    csv_response = signed_in.get(html.unescape(link.group(1)))
    assert csv_response.status_code == 200 and csv_response.mimetype == "text/csv"
    assert f"payback-{group_by}-2026-06-01-2026-07-31-45d.csv" in csv_response.headers["Content-Disposition"]
    assert csv_rows(csv_response.get_data(as_text=True)) == [{k: cell(v) for k, v in r.items()} for r in rows]


def test_payback_chart_summary_and_the_charts_are_labelled(signed_in: FlaskClient) -> None:
    page = signed_in.get("/dashboard/payback", query_string=RANGE).get_data(as_text=True)
    canvases = re.findall(r"<canvas ([^>]*)>", page)
    assert len(canvases) == 2
    for attrs in canvases:
        assert 'role="img"' in attrs
        label = html.unescape(re.search(r'aria-label="([^"]*)"', attrs).group(1))  # type: ignore[union-attr]
        assert "table below" in label
    assert "for 6 campaigns" in text(page) or "for 6 campaigns" in html.unescape(page)
    # No inline script: only the vendored Chart.js, our files and the JSON block.
    scripts = re.findall(r"<script([^>]*)>", page)
    assert all("src=" in s or 'type="application/json"' in s for s in scripts), scripts
    assert "chart-4.6.1.umd.min.js" in page and "reports.js" in page and "reports.css" in page
    assert 'aria-current="page">Payback<' in page


def test_cohorts_page_and_csv_carry_v1s_figures(signed_in: FlaskClient, published: dict[str, str]) -> None:
    for group_by in ("campaign", "country"):
        query = {**COHORT_RANGE, "group_by": group_by}
        curves = v1(signed_in, "cohorts", published["key"], query)["cohorts"]
        assert curves
        response = signed_in.get("/dashboard/cohorts", query_string=query)
        assert response.status_code == 200
        page = response.get_data(as_text=True)
        chart = data_block(page, "cohorts-data")
        assert [c["label"] for c in chart["curves"]] == [c["label"] for c in curves]
        for drawn, curve in zip(chart["curves"], curves, strict=True):
            weeks = curve["weeks"]
            assert drawn["retained_pct"] == [w["retained_pct"] for w in weeks]
            assert drawn["cumulative_revenue"] == [w["cumulative_revenue"] for w in weeks]
            # Dashed from the first week fewer users than week 0's are estimated from.
            partial = [w["week"] for w in weeks if w["users"] < weeks[0]["users"]]
            assert drawn["immature_from"] == (partial[0] if partial else None)
        assert chart["weeks"] == max(len(c["weeks"]) for c in curves)
        assert any(c["immature_from"] is not None for c in chart["curves"]), "the range spans cohorts of many ages"

        table = table_rows(page, "cohorts-table")
        flat = [(c["label"], w, c) for c in curves for w in c["weeks"]]
        assert len(table) == len(flat)
        for t, (label, w, _) in zip(table, flat, strict=True):
            assert t[:5] == [
                label,
                str(w["week"]),
                percent(w["retained_pct"]),
                money(w["cumulative_revenue"]),
                str(w["users"]),
            ]
        assert "Dashed: weeks only the older cohorts have reached" in text(page)

        link = re.search(r'<a href="([^"]+)" download>', page)
        assert link
        body = signed_in.get(html.unescape(link.group(1))).get_data(as_text=True)
        assert csv_rows(body) == [
            {
                "label": label,
                "week": str(w["week"]),
                "retained_pct": str(w["retained_pct"]),
                "cumulative_revenue": str(w["cumulative_revenue"]),
                "users": str(w["users"]),
            }
            for label, w, _ in flat
        ]


def test_without_dates_the_pages_show_the_90_days_ending_on_the_last_data_day(
    signed_in: FlaskClient, published: dict[str, str]
) -> None:
    page = signed_in.get("/dashboard/payback").get_data(as_text=True)
    start = re.search(r'id="filter-start_date" name="start_date" type="date" value="([^"]+)"', page)
    end = re.search(r'id="filter-end_date" name="end_date" type="date" value="([^"]+)"', page)
    assert start and end
    assert (date.fromisoformat(end.group(1)) - date.fromisoformat(start.group(1))).days == 89
    assert end.group(1).startswith("2026-08")  # 70 days of history from 2026-06-01
    expected = v1(signed_in, "payback", published["key"], {"start_date": start.group(1), "end_date": end.group(1)})
    assert data_block(page, "payback-data")["labels"] == [r["cohort"] for r in expected["data"]]
    assert "Clear filters" not in page
    cohorts = signed_in.get("/dashboard/cohorts").get_data(as_text=True)
    assert 'id="filter-cohort_end" name="cohort_end" type="date" value="' + end.group(1) in cohorts
    assert data_block(cohorts, "cohorts-data")["curves"]


@pytest.mark.parametrize(
    ("path", "query", "field", "message"),
    [
        (
            "payback",
            {"start_date": "2026/06/01", "end_date": "2026-06-30"},
            "start_date",
            "must be a date as YYYY-MM-DD",
        ),
        (
            "payback",
            {"start_date": "2026-02-30", "end_date": "2026-06-30"},
            "start_date",
            "must be a real calendar date",
        ),
        (
            "payback",
            {"start_date": "2026-06-30", "end_date": "2026-06-01"},
            "end_date",
            "must not be before the first day (start_date)",
        ),
        ("payback", {**RANGE, "group_by": "platform"}, "group_by", "Input should be"),
        ("payback", {**RANGE, "cohort_window_days": "0"}, "cohort_window_days", "greater than or equal to 1"),
        ("payback", {**RANGE, "cohort_window_days": "366"}, "cohort_window_days", "less than or equal to 365"),
        ("payback", {**RANGE, "cohort_window_days": "ten"}, "cohort_window_days", "valid integer"),
        ("payback", {"start_date": "2026-06-01"}, "end_date", "Field required"),
        ("cohorts", {"cohort_start": "2026-06-30", "cohort_end": "2026-06-01"}, "cohort_end", "must not be before"),
        ("cohorts", {**COHORT_RANGE, "group_by": "x"}, "group_by", "Input should be"),
    ],
)
def test_invalid_filters_are_shown_beside_their_field(
    signed_in: FlaskClient, path: str, query: dict[str, str], field: str, message: str
) -> None:
    response = signed_in.get(f"/dashboard/{path}", query_string=query)
    assert response.status_code == 400 and response.mimetype == "text/html"
    page = response.get_data(as_text=True)
    assert re.search(rf'id="filter-{field}"[^>]*aria-invalid="true" aria-describedby="error-{field}"', page), page
    error = re.search(rf'<small id="error-{field}" class="field-error">([^<]*)</small>', page)
    assert error and message in html.unescape(error.group(1))
    assert "Correct the highlighted field" in page and "<canvas" not in page
    for name, value in query.items():  # what was typed stays in the form
        if name != "group_by":
            assert f'name="{name}" type=' in page and f'value="{html.escape(value)}"' in page

    csv_response = signed_in.get(f"/dashboard/{path}.csv", query_string=query)
    assert csv_response.status_code == 400 and csv_response.mimetype == "text/html"
    assert f"Invalid query parameter &#39;{field}&#39;" in csv_response.get_data(as_text=True)


def test_no_rows_for_these_filters_offers_to_clear_them(signed_in: FlaskClient) -> None:
    page = signed_in.get("/dashboard/payback", query_string={"start_date": "2020-01-01", "end_date": "2020-01-31"})
    assert page.status_code == 200
    body = page.get_data(as_text=True)
    assert "No payback rows for these filters" in body and '<a href="/dashboard/payback">Clear filters</a>' in body
    assert "Data as of" in body and "<canvas" not in body and "chart-4.6.1" not in body
    cohorts = signed_in.get(
        "/dashboard/cohorts", query_string={"cohort_start": "2020-01-01", "cohort_end": "2020-01-31"}
    )
    body = cohorts.get_data(as_text=True)
    assert "No cohort curves for these filters" in body and '<a href="/dashboard/cohorts">Clear filters</a>' in body


def test_another_workspace_sees_none_of_these_figures(
    client: FlaskClient, db: Database, published: dict[str, str]
) -> None:
    with db.write() as conn:
        other = bootstrap(conn, name="Other")
    sign_in(client, db, other["workspace_id"])
    body = client.get("/dashboard/payback", query_string=RANGE).get_data(as_text=True)
    assert "No payback rows for these filters" in body
    assert client.get("/dashboard/payback.csv", query_string=RANGE).get_data(as_text=True).splitlines() == [
        "cohort,spend,cac,trials,trial_conversion_rate,subscriptions,roas_30d,payback_days,ltv_projected"
    ]
    assert "No cohort curves" in client.get("/dashboard/cohorts", query_string=COHORT_RANGE).get_data(as_text=True)


@pytest.mark.parametrize(
    "path", ["/dashboard/payback", "/dashboard/payback.csv", "/dashboard/cohorts", "/dashboard/cohorts.csv"]
)
def test_the_reports_need_a_signed_in_operator(client: FlaskClient, path: str) -> None:
    response = client.get(path, query_string=RANGE)
    assert response.status_code == 401 and response.mimetype == "text/html"
    assert "flokit admin login-link" in response.get_data(as_text=True)


def test_before_the_first_refresh_the_pages_say_how_to_build_reports(database_url: str, tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "empty", database_url=database_url, instance_key=secrets.token_urlsafe(32))
    db = database_for(database_url)
    with db.write() as conn:
        ws = bootstrap(conn, name="Empty")
    client = sign_in(create_app(settings).test_client(), db, ws["workspace_id"])
    for path in ("/dashboard/payback", "/dashboard/cohorts"):
        response = client.get(path)
        assert response.status_code == 200
        body = text(response.get_data(as_text=True))
        assert "No reports yet" in body and "flokit refresh" in body and "six-hourly refresh" in body
        assert "Data as of" not in body and "Clear filters" not in body and "<canvas" not in body
    csv_body = client.get("/dashboard/payback.csv").get_data(as_text=True)
    assert csv_body.splitlines() == [
        "cohort,spend,cac,trials,trial_conversion_rate,subscriptions,roas_30d,payback_days,ltv_projected"
    ]
