"""The metrics pipeline recovers the demo's simulated subscriptions exactly, in process (the e2e
planted-truth test does the same through `flokit demo seed`, `flokit refresh` and the API)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import polars as pl
import pytest

from transforms.demo import DemoConfig, generate
from transforms.demo_truth import subscription_truth
from transforms.reports.money import RATE_SCHEMA, rates_frame
from transforms.subscriptions import metrics
from transforms.subscriptions.periods import CATALOG_SCHEMA, GRANT_SCHEMA

CONFIG = DemoConfig("ws_demo", 2500, 45, 11, date(2026, 9, 1))


def test_the_demo_truth_is_recovered_day_by_day() -> None:
    data = generate(CONFIG)
    as_of = datetime(2026, 10, 10, 6, tzinfo=UTC)  # mid-history: its 40th day is unfinished
    days = [CONFIG.start - timedelta(days=7) + timedelta(days=k) for k in range(70)]
    rates = rates_frame(
        pl.DataFrame([{"rate_date": d, "currency": "USD", "per_eur": 1.1} for d in days], schema=RATE_SCHEMA)
    )
    daily, paired, _ = metrics.compute(
        data.events.lazy(),
        grants=pl.DataFrame(schema=GRANT_SCHEMA),
        catalog=pl.DataFrame(schema=CATALOG_SCHEMA),
        users=pl.DataFrame(
            schema={"workspace_id": pl.String, "user_id": pl.String, "country": pl.String, "campaign": pl.String}
        ),
        rates=rates,
        reporting=pl.DataFrame([{"workspace_id": "ws_demo", "reporting_currency": "USD"}]),
        as_of=as_of,
    )
    report = metrics.report(daily, paired, start=CONFIG.start, end=as_of.date(), interval="day", group_by="none")
    truth = subscription_truth(CONFIG, data, as_of)
    assert len(truth) == (as_of.date() - CONFIG.start).days
    rows = {r["period_start"].isoformat(): r for r in report.to_dicts()}
    customers = daily.group_by("date").agg(pl.col("new_customers").sum())
    by_date = {d.isoformat(): n for d, n in customers.iter_rows()}
    assert {d["date"]: d.pop("new_customers") for d in truth} == {d["date"]: by_date.get(d["date"], 0) for d in truth}
    for day in truth:
        row = rows[day.pop("date")]
        for name, value in day.items():
            assert row[name] == pytest.approx(value, abs=1e-6), name
    assert sum(d["churned_subscriptions"] for d in truth) > 0 and sum(d["refunds"] for d in truth) > 0
