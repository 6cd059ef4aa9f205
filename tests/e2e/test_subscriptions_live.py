"""Subscription figures through the real provider path, on both databases: purchases posted to
the generic-subscription webhook (signed as a billing system signs them), a promotional grant
through v1, `flokit refresh` (the real Dagster runs), then the report and the live overview.

What a user checks: the overview counts what the ledger grants now (paid purchases only: a
promotional grant, a refunded purchase and an expired one do not count), its MRR is RevenueCat's
normalization of each price at its day's rate, right after a refresh it equals the report's last
day, and it follows a purchase the moment the store states it, before any refresh."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import Any

import duckdb
import pytest
from flask.testing import FlaskClient

from tests.support import bearer
from tests.support.cli import flokit_in_process
from tests.support.money import RATES
from tests.support.notifications import SUBSCRIPTION, iso, post
from tests.support.provider_notifications import KEY, settings
from warehouse.db import Database
from warehouse.entitlements.stores import StoresUpdate, set_stores
from warehouse.settings import Settings

__all__ = ["settings"]  # the provider tests' settings: an instance key, which the generic secret is sealed under
pytestmark = pytest.mark.e2e
NOW = datetime.now(UTC)
# Paid prices are dated within the bundled ECB rates (they end on a known day), so JPY and EUR
# convert at their own day's rate; USD is the reporting currency.
RATED = datetime.combine(RATES["rate_date"].max(), datetime.min.time(), tzinfo=UTC) - timedelta(days=3)


def _rate(currency: str, at: datetime) -> float:
    """Units of `currency` per EUR on the latest rate day at or before `at` (the report's rule)."""
    rows = RATES.filter((RATES["currency"] == currency) & (RATES["rate_date"] <= at.date())).sort("rate_date")
    return float(rows["per_eur"][-1])


def _usd(amount: float, currency: str, at: datetime) -> float:
    return amount / _rate(currency, at) * _rate("USD", at)


def _event(kind: str, n: int, user: str, key: str, at: datetime, **fields: Any) -> dict[str, Any]:
    return {
        "id": f"evt_{key}_{n}",
        "type": kind,
        "user_id": user,
        "purchase_id": key,
        "product_id": fields.pop("product_id", "pro_monthly"),
        "kind": "subscription",
        "channel": "iap",
        "occurred_at": iso(at),
        **fields,
    }


def _purchases() -> list[dict[str, Any]]:
    month, week, year = timedelta(days=30), timedelta(days=7), timedelta(days=365)
    start_u1 = NOW - timedelta(days=40)
    return [
        # u1: monthly EUR, renewed on a rated day; active
        _event("purchase", 1, "u1", "k1", start_u1, expires_at=iso(start_u1 + month), revenue=9.99, currency="EUR",
               billing_period="monthly"),
        _event("renewal", 2, "u1", "k1", RATED, expires_at=iso(NOW + timedelta(days=20)), revenue=9.99,
               currency="EUR", billing_period="monthly"),
        # u2: weekly USD; active
        _event("purchase", 1, "u2", "k2", NOW - timedelta(days=2), expires_at=iso(NOW + timedelta(days=5)),
               revenue=4.99, currency="USD", billing_period="weekly", product_id="pro_weekly"),
        # u3: yearly JPY bought on a rated day; active
        _event("purchase", 1, "u3", "k3", RATED - timedelta(days=1), expires_at=iso(RATED - timedelta(days=1) + year),
               revenue=6000, currency="JPY", billing_period="yearly", product_id="pro_yearly"),
        # u4: in a free trial
        _event("purchase", 1, "u4", "k4", NOW - timedelta(days=1), expires_at=iso(NOW + timedelta(days=6)),
               in_trial=True, billing_period="weekly", product_id="pro_weekly"),
        # u5: bought, then refunded (access revoked): churned, not active
        _event("purchase", 1, "u5", "k5", NOW - timedelta(days=20), expires_at=iso(NOW + timedelta(days=10)),
               revenue=9.99, currency="USD", billing_period="monthly"),
        _event("refund", 2, "u5", "k5", NOW - timedelta(days=10), expires_at=iso(NOW + timedelta(days=10)),
               revenue=9.99, currency="USD"),
        # u6: a week's plan that ran out long ago
        _event("purchase", 1, "u6", "k6", NOW - timedelta(days=50), expires_at=iso(NOW - timedelta(days=50) + week),
               revenue=4.99, currency="USD", billing_period="weekly", product_id="pro_weekly"),
    ]  # fmt: skip


def _get(client: FlaskClient, key: str, path: str, **query: Any) -> Any:
    response = client.get(path, query_string=query, headers=bearer(key))
    assert response.status_code == 200, response.json
    return response.json


@pytest.mark.both_backends(reason="the overview's grouped ledger query is written per dialect (dates, durations)")
def test_the_overview_is_live_and_equals_the_reports_last_day_after_a_refresh(
    client: FlaskClient, db: Database, workspace: dict[str, Any], settings: Settings
) -> None:
    app_id, read_key = workspace["app_id"], workspace["api_key_read_only"]
    with db.write() as conn:
        secret = set_stores(
            conn, app_id=app_id, update=StoresUpdate(new_generic_secret=True), instance_key=KEY
        ).generic_secret
    assert secret is not None
    for body in _purchases():
        response = post(client, SUBSCRIPTION, app_id, body, secret)
        assert response.status_code == 200 and response.json["status"] == "applied", response.json
    granted = client.post(
        "/v1/customers/u7/entitlements",
        json={"app_id": app_id, "product_id": "pro_monthly", "duration": "P1M", "reason": "support goodwill"},
        headers=bearer(workspace["api_key_read_write"]),
    )
    assert granted.status_code == 201, granted.json

    before = _get(client, read_key, "/v1/subscriptions/overview")
    expected_mrr = (
        round(_usd(9.99, "EUR", RATED), 6)
        + round(4.99 * 4, 6)
        + round(_usd(6000, "JPY", RATED - timedelta(days=1)) / 12, 6)
    )
    assert (before["active_subscriptions"], before["active_trials"]) == (3, 1)
    assert before["mrr"] == pytest.approx(expected_mrr, abs=1e-6)
    assert before["arr"] == pytest.approx(expected_mrr * 12, abs=1e-5)
    assert before["currency"] == "USD" and before["flows_as_of"] is None
    assert (before["revenue_last_28_days"], before["new_customers_last_28_days"]) == (0, 0)

    done = flokit_in_process({**os.environ, **settings.child_env()}, "refresh", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    after = _get(client, read_key, "/v1/subscriptions/overview")
    today = NOW.date().isoformat()
    report = _get(client, read_key, "/v1/reports/subscriptions", start_date=today, end_date=today)
    (last,) = report["data"]
    assert (after["active_subscriptions"], after["active_trials"]) == (
        last["active_subscriptions"],
        last["active_trials"],
    )
    assert after["mrr"] == pytest.approx(last["mrr"], abs=1e-6)
    assert after["flows_as_of"] == report["meta"]["generated_at"]
    # The 28 days ending today: u2, u4 and u5 first bought in them; u5's charge was refunded (booked
    # on the charge's day), u4's trial is free, and u1's renewal is older (a rated day).
    assert RATED.date() < NOW.date() - timedelta(days=27)
    assert after["new_customers_last_28_days"] == 3
    assert after["revenue_last_28_days"] == pytest.approx(4.99, abs=1e-6)

    # The analyst catalog: every purchase with its state at the refresh (the promotional grant is none).
    with duckdb.connect(str(settings.paths.catalog), read_only=True) as con:
        purchases = {
            key: (status, store, started)
            for key, status, store, started in con.execute(
                "SELECT purchase_key, status, store, started_at FROM purchases WHERE workspace_id = ?",
                [workspace["workspace_id"]],
            ).fetchall()
        }
        actives = con.execute(
            "SELECT sum(active_subscriptions) FROM subscription_metrics WHERE workspace_id = ? AND date = ?",
            [workspace["workspace_id"], NOW.date()],
        ).fetchone()
    assert {k: v[:2] for k, v in purchases.items()} == {
        "k1": ("active", "generic"),
        "k2": ("active", "generic"),
        "k3": ("active", "generic"),
        "k4": ("in_trial", "generic"),
        "k5": ("refunded", "generic"),
        "k6": ("expired", "generic"),
    }
    assert purchases["k1"][2] == NOW - timedelta(days=40)  # its first billing event, not its latest statement
    assert actives == (last["active_subscriptions"],)

    # Live: a purchase stated now counts at once, before any refresh.
    fresh = _event("purchase", 1, "u8", "k8", NOW - timedelta(minutes=1), expires_at=iso(NOW + timedelta(days=7)),
                   revenue=4.99, currency="USD", billing_period="weekly", product_id="pro_weekly")  # fmt: skip
    assert post(client, SUBSCRIPTION, app_id, fresh, secret).status_code == 200
    now = _get(client, read_key, "/v1/subscriptions/overview")
    assert now["active_subscriptions"] == after["active_subscriptions"] + 1
    assert now["mrr"] == pytest.approx(after["mrr"] + 4.99 * 4, abs=1e-6)
