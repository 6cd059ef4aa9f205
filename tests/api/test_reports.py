"""GET /v1/reports/payback and /v1/reports/cohorts against materialized reports, on both databases."""

import itertools
import shutil
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from flask.testing import FlaskClient

from tests.support import bearer
from tests.support.money import reports_database
from tests.support.reports import refresh, seed_lake
from transforms.reports.curves import MIN_WEEK_USERS
from warehouse.db import Database, utcnow
from warehouse.reports import serving
from warehouse.settings import Settings
from warehouse.tables import workspaces
from warehouse.workspaces import SCOPES, create_key, create_workspace

ROW_FIELDS = [
    "cohort",
    "spend",
    "cac",
    "trials",
    "trial_conversion_rate",
    "subscriptions",
    "roas_30d",
    "payback_days",
    "ltv_projected",
]
PAYBACK = "/v1/reports/payback"
COHORTS = "/v1/reports/cohorts"
SUBSCRIPTIONS = "/v1/reports/subscriptions"
SUBSCRIPTION_FIELDS = [
    "period_start",
    "group",
    "active_subscriptions",
    "active_trials",
    "mrr",
    "arr",
    "new_subscriptions",
    "new_trials",
    "trial_conversions",
    "reactivations",
    "churned_subscriptions",
    "churn_rate",
    "refunds",
    "refund_rate",
    "gross_revenue",
    "net_revenue",
]
RANGE = {"start_date": "2026-06-01", "end_date": "2026-07-31"}


WORKSPACE = "ws_reportsapitest"


@pytest.fixture(scope="module")
def published_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One real refresh per module (it takes seconds); each test gets a copy of its output."""
    data_dir = tmp_path_factory.mktemp("published")
    seed_lake(data_dir, WORKSPACE, users=1500, days=70)
    with dg.DagsterInstance.ephemeral() as instance:
        result = refresh(data_dir, reports_database(data_dir, WORKSPACE), instance)
        assert result is not None and result.success
        event = instance.get_latest_materialization_event(dg.AssetKey("published_reports"))
    return data_dir, event.asset_materialization.metadata["generated_at"].value


@pytest.fixture
def settings(database_url: str, tmp_path: Path, published_dir: tuple[Path, str]) -> Settings:
    data_dir = tmp_path / "reports_data"
    shutil.copytree(published_dir[0], data_dir)
    return Settings(data_dir=data_dir, database_url=database_url)


@pytest.fixture
def published(db: Database, published_dir: tuple[Path, str]) -> dict[str, Any]:
    """The workspace the materialized data belongs to, with its keys."""
    with db.write() as conn:
        conn.execute(
            workspaces.insert().values(
                id=WORKSPACE, name="Reports", reporting_currency="USD", timezone="UTC", created_at=utcnow()
            )
        )
        keys = {scope: create_key(conn, workspace_id=WORKSPACE, scope=scope).api_key for scope in SCOPES}
    return {
        "workspace_id": WORKSPACE,
        "api_key_read_only": keys["read_only"],
        "api_key_read_write": keys["read_write"],
        "materialized_at": published_dir[1],
    }


def get(client: FlaskClient, path: str, key: str, **query: Any) -> Any:
    return client.get(path, query_string=query, headers=bearer(key))


def test_payback_rows_carry_every_spec_field(client: FlaskClient, published: dict[str, Any]) -> None:
    response = get(client, PAYBACK, published["api_key_read_only"], **RANGE)
    assert response.status_code == 200, response.json
    body = response.json
    assert body["meta"]["currency"] == "USD" and body["meta"]["cohort_window_days"] == 30
    generated = body["meta"]["generated_at"]
    assert generated.endswith("Z") and generated[:19] == published["materialized_at"][:19]
    rows = body["data"]
    assert [r["cohort"] for r in rows] == sorted(
        ["apple_search", "google_uac", "meta_broad", "meta_lookalike", "organic", "tiktok_spark"]
    )
    for row in rows:
        assert list(row) == ROW_FIELDS
        assert 0 <= row["trial_conversion_rate"] <= 1 and row["ltv_projected"] > 0
        assert row["payback_days"] is None or 0 <= row["payback_days"] < 30
    paid = [r for r in rows if r["cohort"] != "organic"]
    assert all(r["spend"] > 0 and r["cac"] > 0 and r["roas_30d"] > 0 for r in paid)
    organic = next(r for r in rows if r["cohort"] == "organic")
    assert organic["spend"] == 0 and organic["roas_30d"] is None and organic["payback_days"] is None


def test_window_and_group_by_change_the_answer(client: FlaskClient, published: dict[str, Any]) -> None:
    key = published["api_key_read_only"]
    short = get(client, PAYBACK, key, **RANGE, cohort_window_days=7).json["data"]
    long = get(client, PAYBACK, key, **RANGE, cohort_window_days=365).json["data"]
    for a, b in zip(short, long, strict=True):
        assert a["spend"] == b["spend"] and a["roas_30d"] == b["roas_30d"]  # ROAS is always 30 days
        assert a["trials"] <= b["trials"] and a["subscriptions"] <= b["subscriptions"]
    assert any(r["payback_days"] is not None and r["payback_days"] >= 30 for r in long)
    total = {}
    for group_by in ("campaign", "creative", "country", "offer", "paywall"):
        rows = get(client, PAYBACK, key, **RANGE, group_by=group_by).json["data"]
        total[group_by] = round(sum(r["spend"] for r in rows), 0)
    assert len(set(total.values())) == 1  # every grouping splits the same spend
    offers = {r["cohort"] for r in get(client, PAYBACK, key, **RANGE, group_by="offer").json["data"]}
    assert offers == {"(none)", "pro_monthly_1999", "pro_weekly_499", "pro_weekly_699"}


def test_cohort_curves(client: FlaskClient, published: dict[str, Any]) -> None:
    response = get(client, COHORTS, published["api_key_read_only"], cohort_start="2026-06-01", cohort_end="2026-06-14")
    assert response.status_code == 200
    cohorts = response.json["cohorts"]
    assert {c["label"] for c in cohorts} >= {"meta_broad", "organic"}
    for curve in cohorts:
        weeks = curve["weeks"]
        assert [w["week"] for w in weeks] == list(range(len(weeks))) and len(weeks) >= 8
        assert weeks[0]["retained_pct"] == 1.0
        assert all(0 <= w["retained_pct"] <= 1 for w in weeks)
        assert weeks[-1]["retained_pct"] < weeks[0]["retained_pct"]
    by_country = get(
        client,
        COHORTS,
        published["api_key_read_only"],
        cohort_start="2026-06-01",
        cohort_end="2026-06-14",
        group_by="country",
    )
    assert {c["label"] for c in by_country.json["cohorts"]} == {"US", "GB", "DE", "FR", "BR", "JP"}


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: reports/serving.py")
def test_cohort_curves_across_cohorts_of_different_ages_are_cumulative(
    client: FlaskClient, published: dict[str, Any]
) -> None:
    """Cohorts from 60 to 20 days before the last data day have seen 8 to 2 complete weeks. Each
    week is estimated over the users whose week is complete, so `users` shrinks with the week,
    and the cumulative revenue is a running sum: it never falls (the generated history has no
    week whose refunds exceed its charges). Averaging cumulative revenue over whichever cohorts
    had a week made late weeks (the oldest cohorts only) fall below earlier ones."""
    response = get(client, COHORTS, published["api_key_read_only"], cohort_start="2026-06-10", cohort_end="2026-07-20")
    assert response.status_code == 200
    curves = response.json["cohorts"]
    assert {c["label"] for c in curves} >= {"meta_broad", "organic"}
    for curve in curves:
        weeks = curve["weeks"]
        users = [w["users"] for w in weeks]
        revenue = [w["cumulative_revenue"] for w in weeks]
        assert [w["week"] for w in weeks] == list(range(len(weeks))) and len(weeks) >= 3, curve
        assert all(u >= MIN_WEEK_USERS for u in users), curve
        assert users == sorted(users, reverse=True) and users[-1] < users[0], curve
        assert all(later >= earlier for earlier, later in itertools.pairwise(revenue)), curve
        assert weeks[0]["retained_pct"] == 1.0


def test_another_workspace_sees_no_rows(client: FlaskClient, published: dict[str, Any], db: Database) -> None:
    with db.write() as conn:
        other = create_workspace(conn, name="Other", reporting_currency="EUR")
        key = create_key(conn, workspace_id=other.id, scope="read_only").api_key
    body = get(client, PAYBACK, key, **RANGE).json
    assert body["data"] == [] and body["meta"]["currency"] == "EUR"
    assert get(client, COHORTS, key, cohort_start="2026-06-01", cohort_end="2026-06-30").json == {"cohorts": []}
    empty = get(client, SUBSCRIPTIONS, key, **RANGE).json["data"]  # every day, holding nothing
    assert len(empty) == 61 and all(r["active_subscriptions"] == 0 and r["gross_revenue"] == 0 for r in empty)


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: subscriptions/answers.py")
def test_subscription_metrics_by_day_week_month_and_group(client: FlaskClient, published: dict[str, Any]) -> None:
    key = published["api_key_read_only"]
    days = get(client, SUBSCRIPTIONS, key, **RANGE).json
    assert days["meta"] == {
        "currency": "USD",
        "generated_at": published["materialized_at"].replace("+00:00", "Z")[:23] + "Z",
        "interval": "day",
        "group_by": "none",
    }
    rows = days["data"]
    assert [r["period_start"] for r in rows][:2] == ["2026-06-01", "2026-06-02"] and len(rows) == 61
    assert all(list(r) == SUBSCRIPTION_FIELDS and r["group"] is None for r in rows)
    assert rows[-1]["active_subscriptions"] > 0 and rows[-1]["mrr"] > 0
    assert rows[-1]["arr"] == pytest.approx(rows[-1]["mrr"] * 12, abs=1e-5)
    assert all(r["active_subscriptions"] >= 0 and (r["churn_rate"] is None or r["churn_rate"] >= 0) for r in rows)
    weeks = get(client, SUBSCRIPTIONS, key, **RANGE, interval="week").json["data"]
    assert weeks[0]["period_start"] == "2026-06-01"  # a Monday
    assert all(date.fromisoformat(w["period_start"]).weekday() == 0 for w in weeks)
    assert sum(w["new_subscriptions"] for w in weeks) == sum(r["new_subscriptions"] for r in rows)
    assert sum(w["churned_subscriptions"] for w in weeks) <= sum(r["churned_subscriptions"] for r in rows)
    by_day = {r["period_start"]: r for r in rows}
    for week in weeks[:-1]:
        sunday = date.fromisoformat(week["period_start"]).toordinal() + 6
        assert week["active_subscriptions"] == by_day[date.fromordinal(sunday).isoformat()]["active_subscriptions"]
    months = get(client, SUBSCRIPTIONS, key, **RANGE, interval="month").json["data"]
    assert [m["period_start"] for m in months] == ["2026-06-01", "2026-07-01"]
    products = get(client, SUBSCRIPTIONS, key, **RANGE, interval="month", group_by="product").json
    assert products["meta"]["group_by"] == "product"
    june = [r for r in products["data"] if r["period_start"] == "2026-06-01"]
    assert {r["group"] for r in june} == {"pro_weekly_699", "pro_monthly_1999", "pro_weekly_499"}
    assert sum(r["mrr"] for r in june) == pytest.approx(months[0]["mrr"], abs=1e-5)
    assert sum(r["gross_revenue"] for r in june) == pytest.approx(months[0]["gross_revenue"], abs=1e-5)


@pytest.mark.parametrize(
    ("path", "query", "message"),
    [
        (PAYBACK, {"end_date": "2026-06-30"}, "'start_date': Field required"),
        (PAYBACK, {"start_date": "2026/06/01", "end_date": "2026-06-30"}, "'start_date': must be a date as YYYY-MM-DD"),
        (PAYBACK, {"start_date": "2026-02-30", "end_date": "2026-06-30"}, "'start_date': must be a real calendar date"),
        (PAYBACK, {"start_date": "2026-06-30", "end_date": "2026-06-01"}, "'end_date': must not be before start_date"),
        (PAYBACK, {**RANGE, "group_by": "platform"}, "'group_by'"),
        (PAYBACK, {**RANGE, "cohort_window_days": "0"}, "'cohort_window_days'"),
        (PAYBACK, {**RANGE, "cohort_window_days": "366"}, "'cohort_window_days'"),
        (PAYBACK, {**RANGE, "cohort_window_days": "ten"}, "'cohort_window_days'"),
        (SUBSCRIPTIONS, {"start_date": "2026-06-01"}, "'end_date': Field required"),
        (SUBSCRIPTIONS, {"start_date": "2026-06-30", "end_date": "2026-06-01"}, "'end_date': must not be before"),
        (SUBSCRIPTIONS, {"start_date": "2023-01-01", "end_date": "2026-01-02"}, "'end_date': must be at most 3 years"),
        (SUBSCRIPTIONS, {**RANGE, "interval": "year"}, "'interval'"),
        (SUBSCRIPTIONS, {**RANGE, "group_by": "creative"}, "'group_by'"),
        (COHORTS, {"cohort_start": "2026-06-01"}, "'cohort_end': Field required"),
        (COHORTS, {"cohort_start": "2026-06-30", "cohort_end": "2026-06-01"}, "'cohort_end': must not be before"),
        (COHORTS, {"cohort_start": "2026-06-01", "cohort_end": "2026-06-30", "group_by": "x"}, "'group_by'"),
    ],
)
def test_invalid_queries_are_400(
    client: FlaskClient, workspace: dict[str, Any], path: str, query: dict, message: str
) -> None:
    response = get(client, path, workspace["api_key_read_only"], **query)
    assert response.status_code == 400
    assert response.json["error"] == "invalid_request" and message in response.json["message"]


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: reports/serving.py, duckdb_files.py, paths.py")
def test_the_endpoint_follows_a_new_publish(client: FlaskClient, published: dict[str, Any], settings: Settings) -> None:
    key = published["api_key_read_only"]
    first = get(client, PAYBACK, key, **RANGE).json["meta"]["generated_at"]
    later = datetime(2030, 1, 1, tzinfo=UTC)
    serving.publish(settings.paths.reports, settings.paths.lake(), generated_at=later, as_of=date(2026, 8, 9))
    assert get(client, PAYBACK, key, **RANGE).json["meta"]["generated_at"] == "2030-01-01T00:00:00.000Z" != first
