"""The monitor's rule check on literal signal and spend frames: every metric, every outcome (pending,
inconclusive, ok, breach), both comparator directions, consecutive checks, scopes, and an A/A run of
repeated checks over equal data that must not roll back (with a planted drop it must)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import numpy as np
import polars as pl
import pytest

from transforms.actions.monitoring import Outcome, evaluate, first_window_day, observation_over
from transforms.actions.rules import RollbackRule
from transforms.reports.schemas import ACTION_SIGNAL_SCHEMA, CLEAN_SPEND_SCHEMA

WS = "ws_mon"
EFFECTIVE = datetime(2026, 3, 15, 12, 0, tzinfo=UTC)
CS: dict[str, Any] = {"test": "confidence_sequence", "alpha": 0.1, "n_star": 1500}
CONSEC: dict[str, Any] = {"test": "consecutive", "alpha": None, "n_star": None}


def rule(metric: str, comparator: str, value: float, **over: Any) -> RollbackRule:
    relative = over.pop("kind", "relative_to_baseline") == "relative_to_baseline"
    values: dict[str, Any] = {
        "id": "rb1", "metric": metric, "scope_entity": "campaign", "scope_name": "meta_broad",
        "comparator": comparator, "threshold_kind": "relative_to_baseline" if relative else "absolute",
        "threshold_value": value, "baseline_window_days": 14 if relative else None, "window_max_days": 30,
        "min_sample_unit": "installs", "min_sample_value": 100, "grace_hours": 24, "on_breach": "rollback",
        "currency": None, **CS,
    }  # fmt: skip
    return RollbackRule(**{**values, **over})


def row(day: date, observed_through: date, **values: Any) -> dict[str, Any]:
    out: dict[str, Any] = {name: 0 for name in ACTION_SIGNAL_SCHEMA}
    out |= {"workspace_id": WS, "cohort_date": day, "campaign": "meta_broad", "creative": "c1", "country": "US"}
    out |= {"offer": "monthly", "paywall": "main", "spend": 0.0, **values}
    for name in ACTION_SIGNAL_SCHEMA:
        if name.startswith("net_rev"):
            out[name] = float(out[name])
    out["complete_days"] = max(0, min(30, (observed_through - day).days))
    return out


def signals(rows: list[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=ACTION_SIGNAL_SCHEMA)


def days(first: date, last: date) -> list[date]:
    return [first + timedelta(days=k) for k in range((last - first).days + 1)]


BASELINE = days(date(2026, 3, 1), date(2026, 3, 14))
NO_SPEND = pl.DataFrame(schema=CLEAN_SPEND_SCHEMA)


def history(now: datetime, before: dict[str, Any], after: dict[str, Any], **cells: Any) -> pl.DataFrame:
    """Baseline days 1-14 March with `before` per day, then 15 March (the change's own day, which
    belongs to neither side: it carries a poison value) and every later day up to `now` with `after`."""
    through = now.date()
    rows = [row(d, through, **before, **cells) for d in BASELINE]
    rows.append(row(date(2026, 3, 15), through, installs=1, spend=10_000.0, **cells))
    rows += [row(d, through, **after, **cells) for d in days(date(2026, 3, 16), through)]
    return signals(rows)


def check(r: RollbackRule, frame: pl.DataFrame, now: datetime, **kw: Any) -> Outcome:
    return evaluate(r, frame, kw.pop("spend", NO_SPEND), EFFECTIVE, now, **kw)


NOW = datetime(2026, 3, 23, 6, 0, tzinfo=UTC)  # window: 16-22 March (7 complete days)


def test_the_window_starts_with_the_first_whole_day_after_the_change() -> None:
    assert first_window_day(EFFECTIVE) == date(2026, 3, 16)
    assert first_window_day(datetime(2026, 3, 15, tzinfo=UTC)) == date(2026, 3, 15)
    assert not observation_over(EFFECTIVE, EFFECTIVE + timedelta(days=13, hours=23), 14)
    assert observation_over(EFFECTIVE, EFFECTIVE + timedelta(days=14), 14)


def test_within_the_grace_period_a_rule_is_pending_whatever_the_data() -> None:
    frame = history(NOW, {"installs": 100, "spend": 200.0}, {"installs": 100, "spend": 2000.0})
    out = check(rule("cpi", "gt", 1.3), frame, EFFECTIVE + timedelta(hours=23))
    assert out.status == "pending" and out.observed is None
    # Right after the grace period no whole day since the change is observed yet; later it breaches.
    assert check(rule("cpi", "gt", 1.3), frame, EFFECTIVE + timedelta(hours=24)).status == "inconclusive"
    assert check(rule("cpi", "gt", 1.3), frame, NOW).status == "breach"


def test_below_the_minimum_sample_a_rule_is_inconclusive_never_a_breach() -> None:
    frame = history(NOW, {"installs": 100, "spend": 200.0}, {"installs": 10, "spend": 200.0})
    out = check(rule("cpi", "gt", 1.3, min_sample_value=150), frame, NOW)
    assert out.status == "inconclusive" and out.sample == 70 and out.observed == pytest.approx(20.0)
    assert "70 installs" in out.detail and "150" in out.detail


@pytest.mark.parametrize(
    ("after_spend", "status"), [(200.0, "ok"), (400.0, "breach"), (250.0, "ok")], ids=["equal", "doubled", "+25%"]
)
def test_cpi_rising_above_its_baseline(after_spend: float, status: str) -> None:
    frame = history(NOW, {"installs": 100, "spend": 200.0}, {"installs": 100, "spend": after_spend})
    out = check(rule("cpi", "gt", 1.3), frame, NOW)
    assert out.status == status
    assert out.observed == pytest.approx(after_spend / 100) and out.baseline == pytest.approx(2.0)
    assert out.threshold == pytest.approx(2.6) and out.sample == 700
    assert out.bound is not None and out.bound < out.observed  # the lower end of the sequence
    assert (out.bound > 2.6) == (status == "breach")


def test_cpi_falling_below_an_absolute_threshold_and_the_currency_must_match() -> None:
    r = rule("cpi", "lt", 1.5, kind="absolute", currency="USD")
    frame = history(NOW, {"installs": 100, "spend": 200.0}, {"installs": 200, "spend": 200.0})
    out = check(r, frame, NOW, reporting_currency="USD")
    assert out.status == "breach" and out.observed == pytest.approx(1.0) and out.baseline is None
    assert out.bound is not None and out.bound > 1.0  # the upper end, still below 1.50
    assert check(r, frame, NOW, reporting_currency="EUR").status == "inconclusive"
    fine = history(NOW, {"installs": 100, "spend": 200.0}, {"installs": 100, "spend": 200.0})
    assert check(r, fine, NOW, reporting_currency="USD").status == "ok"


@pytest.mark.parametrize(("after_trials", "status"), [(30, "ok"), (15, "breach"), (27, "ok")])
def test_trial_rate_falling_below_its_baseline(after_trials: int, status: str) -> None:
    frame = history(NOW, {"installs": 100, "trials": 30}, {"installs": 100, "trials": after_trials})
    out = check(rule("trial_rate", "lt", 0.8), frame, NOW)
    assert out.status == status and out.observed == pytest.approx(after_trials / 100)
    assert out.threshold == pytest.approx(0.24) and out.bound is not None and out.bound > out.observed


def test_trial_to_paid_reads_only_cohorts_old_enough_for_their_trials_to_convert() -> None:
    now = datetime(2026, 4, 5, 6, 0, tzinfo=UTC)  # window 16 March - 4 April; 5 April observed
    through = now.date()
    rows = [row(d, through, installs=100, trials=40, trial_conversions=16) for d in BASELINE]
    # Old enough (≥ 9 complete days): the same 40 % conversion as before.
    rows += [
        row(d, through, installs=100, trials=40, trial_conversions=16)
        for d in days(date(2026, 3, 16), date(2026, 3, 27))
    ]
    # Young cohorts: trials started, few converted yet. Read, they would look like a collapse.
    rows += [row(d, through, installs=100, trials=40, trial_conversions=1) for d in days(date(2026, 3, 28), through)]
    r = rule("trial_to_paid", "lt", 0.8, min_sample_unit="matured_trials", min_sample_value=300)
    out = check(r, signals(rows), now)
    assert out.status == "ok" and out.observed == pytest.approx(0.4) and out.sample == 12 * 40
    # A workspace with short trials may mature cohorts sooner: then the young ones count (and breach).
    assert check(r, signals(rows), now, trial_maturity_days=1).status == "breach"
    assert check(r.__class__(**{**r.__dict__, "min_sample_value": 500}), signals(rows), now).status == "inconclusive"


@pytest.mark.parametrize(("refunds", "status"), [(10, "ok"), (40, "breach")])
def test_refund_rate_rising_above_its_baseline(refunds: int, status: str) -> None:
    frame = history(NOW, {"installs": 500, "subscriptions": 200, "refunds_n": 10},
                    {"installs": 500, "subscriptions": 200, "refunds_n": refunds})  # fmt: skip
    out = check(rule("refund_rate", "gt", 1.5, min_sample_unit="purchases", min_sample_value=500), frame, NOW)
    assert out.status == status and out.observed == pytest.approx(refunds / 200) and out.sample == 1400


def _revenue(payers: int, price: float) -> dict[str, Any]:
    """Per cohort day: 100 installs, `payers` of whom paid `price` each (within 7, 14 and 30 days)."""
    values: dict[str, Any] = {"installs": 100, "spend": 100.0}
    for h in (7, 14, 30):
        values |= {f"net_rev_d{h}": payers * price, f"net_rev_sq_d{h}": payers * price * price}
    return values


def test_roas_d7_falling_below_its_baseline_on_matured_cohorts_only() -> None:
    now = datetime(2026, 4, 10, 6, 0, tzinfo=UTC)
    through = now.date()
    rows = [row(d, through, **_revenue(10, 10.0)) for d in BASELINE]
    rows += [row(d, through, **_revenue(2, 10.0)) for d in days(date(2026, 3, 16), through)]
    r = rule("roas_d7", "lt", 0.8)
    out = check(r, signals(rows), now)
    # Matured: cohorts with ≥ 7 complete days, 16 March - 3 April = 19 days x 100 users.
    assert out.status == "breach" and out.sample == 1900
    assert (
        out.observed == pytest.approx(0.2)
        and out.baseline == pytest.approx(1.0)
        and out.threshold == pytest.approx(0.8)
    )
    assert out.bound is not None and 0.2 < out.bound < 0.8
    same = [row(d, through, **_revenue(10, 10.0)) for d in [*BASELINE, *days(date(2026, 3, 16), through)]]
    assert check(r, signals(same), now).status == "ok"


def test_a_revenue_rule_needs_500_users_whatever_its_own_minimum() -> None:
    def frame(through: date) -> pl.DataFrame:
        rows = [row(d, through, **_revenue(10, 10.0)) for d in BASELINE]
        return signals(rows + [row(d, through, **_revenue(0, 10.0)) for d in days(date(2026, 3, 16), through)])

    now = datetime(2026, 3, 27, 6, 0, tzinfo=UTC)  # matured window cohorts: 16-20 March, 500 users
    assert check(rule("roas_d7", "lt", 0.8, min_sample_value=1), frame(now.date()), now).status == "breach"
    young = datetime(2026, 3, 26, 6, 0, tzinfo=UTC)  # 400 matured users
    out = check(rule("roas_d7", "lt", 0.8, min_sample_value=1), frame(young.date()), young)
    assert out.status == "inconclusive" and "500" in out.detail and out.sample == 400


def test_arpu_d14_below_an_absolute_threshold() -> None:
    now = datetime(2026, 4, 20, 6, 0, tzinfo=UTC)
    through = now.date()
    rows = [row(d, through, **_revenue(3, 10.0)) for d in days(date(2026, 3, 16), through)]
    r = rule("arpu_d14", "lt", 1.0, kind="absolute", currency="USD")
    out = check(r, signals(rows), now, reporting_currency="USD")
    assert out.status == "breach" and out.observed == pytest.approx(0.3) and out.baseline is None
    rich = [row(d, through, **_revenue(12, 10.0)) for d in days(date(2026, 3, 16), through)]
    assert check(r, signals(rich), now, reporting_currency="USD").status == "ok"


@pytest.mark.parametrize(("after", "status"), [(100, "ok"), (40, "breach")])
def test_installs_per_day_falling_below_their_baseline(after: int, status: str) -> None:
    frame = history(NOW, {"installs": 100}, {"installs": after})
    out = check(rule("installs_per_day", "lt", 0.75, min_sample_unit="days", min_sample_value=3), frame, NOW)
    assert out.status == status and out.observed == pytest.approx(after) and out.baseline == pytest.approx(100)
    assert out.sample == 7


def _spend(values: dict[date, float], campaign: str = "meta_broad") -> pl.DataFrame:
    return pl.DataFrame(
        [{"workspace_id": WS, "spend_date": d, "campaign": campaign, "creative": "c1", "country": "US",
          "spend": v, "amount": v, "currency": "USD", "money_issue": None} for d, v in values.items()],
        schema=CLEAN_SPEND_SCHEMA,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("last_days", "status", "past"),
    [([100.0, 100.0], "ok", False), ([400.0, 400.0], "breach", True), ([100.0, 400.0], "ok", True)],
    ids=["under", "two-days-over", "one-day-over"],
)
def test_daily_spend_overshoot_needs_consecutive_days(last_days: list[float], status: str, past: bool) -> None:
    window = days(date(2026, 3, 16), date(2026, 3, 22))
    values = {d: 100.0 for d in window[:-2]} | dict(zip(window[-2:], last_days, strict=True))
    r = rule("daily_spend", "gt", 300.0, kind="absolute", currency="USD", min_sample_unit="days",
             min_sample_value=1, consecutive=2, on_breach="alert", **CONSEC)  # fmt: skip
    # A spend row of another campaign and of the change's own day are not this rule's.
    spend = pl.concat([_spend(values), _spend({window[-1]: 9_999.0}, "other"), _spend({date(2026, 3, 15): 9_999.0})])
    out = check(r, signals([]), NOW, spend=spend)
    assert out.status == status and out.past_threshold is past and out.observed == last_days[-1]
    assert out.sample == 7 and out.threshold == 300.0


def test_daily_spend_relative_to_its_baseline() -> None:
    spend = _spend({d: 100.0 for d in BASELINE} | {d: 200.0 for d in days(date(2026, 3, 16), date(2026, 3, 22))})
    r = rule("daily_spend", "gt", 1.5, min_sample_unit="days", min_sample_value=2, consecutive=2, **CONSEC)
    out = check(r, signals([]), NOW, spend=spend)
    assert out.status == "breach" and out.baseline == pytest.approx(100.0) and out.threshold == pytest.approx(150.0)


def test_a_consecutive_rule_counts_the_previous_checks() -> None:
    frame = history(NOW, {"installs": 100, "spend": 200.0}, {"installs": 100, "spend": 300.0})
    r = rule("cpi", "gt", 1.3, consecutive=3, **CONSEC)
    assert check(r, frame, NOW, previous=[True, True]).status == "breach"
    first = check(r, frame, NOW, previous=[True])
    assert first.status == "ok" and first.past_threshold
    assert check(r, frame, NOW, previous=[True, False, True]).status == "ok"


def test_sample_ratio_mismatch_of_an_offer_tests_arms() -> None:
    params = {"paywall_id": "pw_1", "country": "US", "control_offer": "monthly", "treatment_offer": "annual"}
    r = rule("srm", "lt", 0.001, kind="absolute", scope_entity="paywall", scope_name="main",
             min_sample_unit="users", min_sample_value=200, **CONSEC)  # fmt: skip
    through = NOW.date()

    def arms(control: int, treatment: int) -> pl.DataFrame:
        rows = []
        for d in days(date(2026, 3, 16), through):
            rows.append(row(d, through, installs=control, paywall_users=control, offer="monthly"))
            rows.append(row(d, through, installs=treatment, paywall_users=treatment, offer="annual"))
            rows.append(row(d, through, installs=500, paywall_users=500, offer="annual", country="DE"))
        return signals(rows)

    balanced = check(r, arms(70, 72), NOW, parameters=params)
    assert balanced.status == "ok" and balanced.sample == 7 * 142 and balanced.observed is not None
    skewed = check(r, arms(90, 50), NOW, parameters=params)
    assert skewed.status == "breach" and skewed.observed is not None and skewed.observed < 0.001
    assert (
        check(r, arms(90, 50), NOW, parameters={**params, "split": {"control": 0.64, "treatment": 0.36}}).status == "ok"
    )
    same = {**params, "treatment_offer": "monthly"}
    assert check(r, arms(90, 50), NOW, parameters=same).status == "inconclusive"


def test_scopes_a_creative_within_its_campaign_and_an_offer_tests_treatment_arm() -> None:
    through = NOW.date()
    rows = [row(d, through, installs=100, trials=30) for d in BASELINE]
    for d in days(date(2026, 3, 16), through):
        rows.append(row(d, through, installs=100, trials=30))
        rows.append(row(d, through, installs=100, trials=2, campaign="other"))  # same creative label elsewhere
    r = rule("trial_rate", "lt", 0.8, scope_entity="creative", scope_name="c1")
    assert check(r, signals(rows), NOW, parameters={"creative": "c1", "campaign": "meta_broad"}).status == "ok"
    assert check(r, signals(rows), NOW).status == "breach"  # unnarrowed: both campaigns' c1
    offer = [row(d, through, installs=100, trials=30) for d in BASELINE]
    for d in days(date(2026, 3, 16), through):
        offer.append(row(d, through, installs=50, trials=15, offer="monthly"))
        offer.append(row(d, through, installs=50, trials=3, offer="annual"))
    params = {"paywall_id": "pw_1", "country": "US", "control_offer": "monthly", "treatment_offer": "annual"}
    pw = rule("trial_rate", "lt", 0.8, scope_entity="paywall", scope_name="main")
    out = check(pw, signals(offer), NOW, parameters=params)
    assert out.status == "breach" and out.observed == pytest.approx(0.06) and out.sample == 350


def test_detail_is_json_ready() -> None:
    frame = history(NOW, {"installs": 100, "spend": 200.0}, {"installs": 100, "spend": 400.0})
    r = rule("cpi", "gt", 1.3)
    detail = check(r, frame, NOW).to_detail(r)
    assert detail["rule_id"] == "rb1" and detail["observed"] == pytest.approx(4.0) and detail["sample"] == 700
    assert set(detail) == {"rule_id", "metric", "observed", "bound", "threshold", "baseline", "sample",
                           "sample_unit", "past_threshold", "text"}  # fmt: skip


def _world(rng: np.random.Generator, rate_after: float) -> pl.DataFrame:
    through = date(2026, 3, 29)
    rows = [row(d, through, installs=100, trials=int(rng.binomial(100, 0.3))) for d in BASELINE]
    rows += [
        row(d, through, installs=100, trials=int(rng.binomial(100, rate_after)))
        for d in days(date(2026, 3, 16), through)
    ]
    return signals(rows)


def test_repeated_checks_over_equal_data_do_not_roll_back_and_a_planted_drop_does() -> None:
    """A/A: 200 seeded worlds, equal 30 % trial rates before and after, checked at 14 daily looks
    against a tight rule (any fall of more than 5 %); a rule that fires in more than 5 % of worlds
    would roll back good changes. The same rule must catch a planted -25 % drop in most worlds."""
    r = rule("trial_rate", "lt", 0.95, grace_hours=0, min_sample_value=100)
    looks = [datetime(2026, 3, 17, 6, tzinfo=UTC) + timedelta(days=k) for k in range(13)]

    def fired(rate_after: float, seed: int) -> bool:
        frame = _world(np.random.default_rng(seed), rate_after)
        return any(check(r, frame, now).status == "breach" for now in looks)

    false_alarms = sum(fired(0.3, seed) for seed in range(200))
    assert false_alarms <= 10, f"{false_alarms} of 200 A/A worlds rolled back"
    caught = sum(fired(0.225, seed) for seed in range(1000, 1050))
    assert caught >= 40, f"a -25 % drop caught in only {caught} of 50 worlds"
