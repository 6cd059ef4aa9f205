"""The sBG LTV model: it recovers known parameters and projects held-out weeks of generated data."""

from datetime import date

import polars as pl
import pytest

from tests.money_support import RATES, reporting
from transforms.demo import DemoConfig, generate
from transforms.reports import lifecycle, ltv, payback


def test_fit_recovers_the_parameters_of_an_exact_curve() -> None:
    curve = ltv.sbg_survival(1.6, 6.0, 12)
    alpha, beta = ltv.fit_sbg(curve)
    assert ltv.sbg_survival(alpha, beta, 30) == pytest.approx(ltv.sbg_survival(1.6, 6.0, 30), abs=1e-3)


def test_fit_handles_flat_and_rising_curves() -> None:
    assert ltv.fit_sbg([1.0]) == (1.0, 1.0)
    alpha, beta = ltv.fit_sbg([1.0, 0.5, 0.6, 0.4])  # a comeback week cannot raise survival
    assert alpha > 0 and beta > 0


def test_projection_matches_held_out_weeks_of_generated_data() -> None:
    """Fit on the first 8 weeks of 21 daily cohorts, project week 20, compare with what happened."""
    start = date(2026, 1, 5)
    data = generate(DemoConfig("ws_ltv", users=30_000, days=21 * 7, seed=11, start=start))
    events = data.events.lazy()
    subscription = lifecycle.subscription_events(events, RATES, reporting("ws_ltv", "ws_l")).collect().lazy()
    early = lifecycle.acquisitions(events).lazy().filter(pl.col("cohort_date") < date(2026, 1, 26))
    cohorts = lifecycle.user_cohorts(early).lazy()
    as_of = date(2026, 5, 31)  # the last day of the history: every early cohort has 20 complete weeks
    active = lifecycle.active_days(events).collect().lazy()
    curves = payback.curves_from_events(cohorts, active, subscription, as_of)
    curves = curves.filter(pl.col("dimension") == "country").collect()
    pooled = curves.group_by("week").agg(pl.col("installs", "active_users", "net_revenue").sum()).sort("week")
    assert pooled.height >= 20
    train = pooled.filter(pl.col("week") < 8)
    fit = ltv.project(train["installs"].to_list(), train["active_users"].to_list(), train["net_revenue"].to_list())
    actual = (pooled["net_revenue"] / pooled["installs"]).cum_sum()[19]
    projected = fit.cumulative_revenue_per_install(19)
    assert projected == pytest.approx(actual, rel=0.12)
    retention_20 = pooled["active_users"][19] / pooled["installs"][19]
    assert ltv.sbg_survival(fit.alpha, fit.beta, 20)[19] == pytest.approx(retention_20, rel=0.12)


def test_ltv_projections_give_one_row_per_group() -> None:
    data = generate(DemoConfig("ws_l", users=2000, days=60, seed=3, start=date(2026, 1, 5)))
    events = data.events.lazy()
    subscription = lifecycle.subscription_events(events, RATES, reporting("ws_ltv", "ws_l"))
    cohorts = lifecycle.user_cohorts(lifecycle.acquisitions(events).lazy()).lazy()
    curves = payback.curves_from_events(
        cohorts, lifecycle.active_days(events), subscription, date(2026, 3, 5)
    ).collect()
    table = ltv.ltv_projections(curves)
    assert table.select("dimension", "value").is_unique().all()
    assert (table["ltv_projected"] >= 0).all()
    assert set(table["dimension"]) == {"campaign", "creative", "country", "offer", "paywall"}
