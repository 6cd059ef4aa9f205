# The formulas are written as the design note writes them (α, σ, ×); ruff would read them as typos.
# ruff: noqa: RUF002, RUF003
"""Checking one rollback rule against the lake: the monitor's pure core (design note §2.6, §4, §5.6).

After every refresh the monitor asks, for each rule of each running action, "has this change made
things worse by more than the rule allows?". The answer is computed here from `action_signals`
(per cohort day and fine cell) and the cleaned spend, exactly as docs/metrics.md defines the
metrics, and is one of four outcomes (§4, Argo's vocabulary): `pending` (still in the grace
period), `inconclusive` (below the minimum sample, or a number the data cannot give), `ok`,
`breach`. Nothing here reads the clock or the database: the caller passes `now` and the rows.

What "since the change" means. Cohorts are UTC days; the day the change took effect mixes users
from before and after it, so it belongs to neither side: the window is the cohorts from the first
whole day after `effective_at` (that day itself when the change took effect at midnight) through
the rule's `window.max_days`, and only days before `now`'s day (a day still filling has partial
installs and spend). The baseline is the `baseline.window_days` cohorts that end the day before
`effective_at`'s day. Delayed metrics read only cohorts old enough on BOTH sides, from
`complete_days`: `roas_d7` cohorts with ≥ 7 complete days, `arpu_d14` with ≥ 14, and
`trial_to_paid` cohorts with ≥ `trial_maturity_days` (default 9: a 7-day trial plus the two days
the design note allows for the conversion to land; the signals carry each cohort's trials and
conversions of days 0–29, not each trial's start, so a cohort's trials count as matured once the
cohort is that old: trials started on the install day, the onboarding paywall's, are matured then;
a trial started later in a young cohort counts as started but not yet converted, which biases the
window slightly low: the rule's threshold and the confidence sequence must absorb it, and a
workspace with longer trials should raise `trial_maturity_days`).

Why these tests. Rates (`trial_rate`, `trial_to_paid`, `refund_rate`), counts (`cpi`,
`installs_per_day`) and revenue (`roas_d7`, `arpu_d14`) are checked with the anytime-valid
confidence sequence of `transforms.actions.sequential` (α and N* from the rule), so looking every
six hours does not inflate false rollbacks; a breach needs the whole sequence on the bad side of
the threshold. Spend overshoot (`daily_spend`) is a known number, not an estimate: it breaches when
the last `consecutive` complete days all overshoot (k-of-k, the spend rule of §5.2: overdelivery on
one day is normal). A rule of another metric with `test: consecutive` breaches when its point value
is past the threshold on this check and the `consecutive − 1` checks before it (`previous`).
Offer tests' sample-ratio mismatch (`srm`) is a χ² p-value of the arms' paywall users against the
planned split.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, Literal

import numpy as np
import polars as pl
from numpy.typing import ArrayLike, NDArray

from transforms.actions import sequential
from transforms.actions.rules import MONEY_METRICS, RollbackRule
from transforms.actions.statistics import FloatArray, Moments, srm_p_value
from transforms.reports.schemas import NONE_LABEL

Status = Literal["pending", "inconclusive", "ok", "breach"]

# A 7-day trial plus the two days §4 allows for its conversion to reach the data.
TRIAL_MATURITY_DAYS = 9
# The complete days since install a revenue metric's cohorts need (its horizon).
_HORIZON = {"roas_d7": 7, "arpu_d14": 14}
# An offer test's planned split when its parameters name none: the design's 50/50 (§5.2).
DEFAULT_SPLIT = (0.5, 0.5)


@dataclass(frozen=True)
class Outcome:
    """One rule's verdict at one check; every number is computed from the rows given.

    `observed`: the metric since the change (metric units: a fraction, money per install, ROAS,
    installs per day, money per day, or the SRM p-value); `baseline`: the same metric over the
    baseline window (None for absolute rules); `threshold`: the line in metric units (the rule's
    multiple × baseline, or its absolute value); `bound`: the end of the confidence sequence
    nearest the threshold (a breach is a bound past the line), or for `consecutive` checks the
    least extreme of the values that had to cross it; `sample`: the units of the rule's
    `min_sample.unit` observed since the change; `past_threshold`: the point value is past the
    line on this check (what later `consecutive` checks count)."""

    status: Status
    observed: float | None
    bound: float | None
    threshold: float | None
    baseline: float | None
    sample: int
    detail: str
    past_threshold: bool = False

    def to_detail(self, rule: RollbackRule) -> dict[str, Any]:
        """The `action_evaluations.detail` of this check (JSON: no NaN or infinities)."""
        return {
            "rule_id": rule.id,
            "metric": rule.metric,
            "observed": _json_number(self.observed),
            "bound": _json_number(self.bound),
            "threshold": _json_number(self.threshold),
            "baseline": _json_number(self.baseline),
            "sample": self.sample,
            "sample_unit": rule.min_sample_unit,
            "past_threshold": self.past_threshold,
            "text": self.detail,
        }


def _json_number(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def first_window_day(effective_at: datetime) -> date:
    """The first cohort wholly after the change (docstring of the module)."""
    day = effective_at.date()
    midnight = effective_at.hour == effective_at.minute == effective_at.second == effective_at.microsecond == 0
    return day if midnight else day + timedelta(days=1)


def observation_over(effective_at: datetime, now: datetime, observation_days: int) -> bool:
    """Whether the policy's observation window (days from `effective_at`) has ended."""
    return now >= effective_at + timedelta(days=observation_days)


def evaluate(
    rule: RollbackRule,
    signals_rows: pl.DataFrame,
    spend_rows: pl.DataFrame,
    effective_at: datetime,
    now: datetime,
    baseline_end: date | None = None,
    *,
    parameters: Mapping[str, Any] | None = None,
    previous: Sequence[bool] = (),
    trial_maturity_days: int = TRIAL_MATURITY_DAYS,
    reporting_currency: str | None = None,
) -> Outcome:
    """Check `rule` for an action whose change took effect at `effective_at`.

    `signals_rows`: the workspace's `action_signals` rows (ACTION_SIGNAL_SCHEMA; more days than
    needed is fine); `spend_rows`: its cleaned spend (CLEAN_SPEND_SCHEMA), read by `daily_spend`
    for campaign and creative scopes; `baseline_end`: the baseline's last cohort day (default the
    day before `effective_at`'s); `parameters`: the action's typed subject, which narrows a scope
    (a creative to its campaign, a paywall to the offer test's country, the treatment arm);
    `previous`: `past_threshold` of this rule's earlier checks, oldest first (`consecutive` rules
    of metrics other than `daily_spend`); `reporting_currency`: the lake's money unit, compared
    with an absolute money threshold's currency.
    """
    params = dict(parameters or {})
    if now < effective_at + timedelta(hours=rule.grace_hours):
        until = effective_at + timedelta(hours=rule.grace_hours)
        return Outcome("pending", None, None, None, None, 0, f"in the grace period until {until:%Y-%m-%d %H:%M} UTC")
    money = rule.threshold_kind == "absolute" and rule.metric in MONEY_METRICS
    if money and reporting_currency is not None and rule.currency != reporting_currency:
        return Outcome(
            "inconclusive",
            None,
            None,
            None,
            None,
            0,
            f"the threshold is in {rule.currency} but the reports are in {reporting_currency}",
        )
    first = first_window_day(effective_at)
    last = min(first + timedelta(days=rule.window_max_days - 1), now.date() - timedelta(days=1))
    b_end = baseline_end if baseline_end is not None else effective_at.date() - timedelta(days=1)
    b_start = b_end - timedelta(days=(rule.baseline_window_days or 1) - 1)
    scoped = _scope(signals_rows, rule, params)
    window = scoped.filter(pl.col("cohort_date").is_between(first, last))
    base = scoped.filter(pl.col("cohort_date").is_between(b_start, b_end))
    if rule.metric == "srm":
        return _srm(rule, window, params)
    if rule.metric == "daily_spend":
        days = [first + timedelta(days=k) for k in range((last - first).days + 1)]
        b_days = [b_start + timedelta(days=k) for k in range((b_end - b_start).days + 1)]
        return _daily_spend(
            rule, _daily(spend_rows, scoped, rule, params, days), _daily(spend_rows, scoped, rule, params, b_days)
        )
    if "treatment_offer" in params and rule.scope_entity == "paywall":
        # An offer test's change is the treatment arm: the control arm still shows what the
        # baseline measured, so mixing it in would dilute any harm by the split.
        window = window.filter(pl.col("offer") == str(params["treatment_offer"]))
    measure = _measure(
        rule, window, base, trial_maturity_days, max(0, (last - first).days + 1), rule.baseline_window_days or 0
    )
    return _verdict(rule, measure, previous)


# --------------------------------------------------------------------------------- scope


def _scope(rows: pl.DataFrame, rule: RollbackRule, params: Mapping[str, Any]) -> pl.DataFrame:
    """The rows of the rule's entity: a campaign; a creative (within the action's campaign when the
    parameters name one: creative labels repeat across campaigns); a paywall (in the offer test's
    country when the parameters name one)."""
    if rule.scope_entity == "campaign":
        return rows.filter(pl.col("campaign") == rule.scope_name)
    if rule.scope_entity == "creative":
        out = rows.filter(pl.col("creative") == rule.scope_name)
        return out.filter(pl.col("campaign") == str(params["campaign"])) if "campaign" in params else out
    out = rows.filter(pl.col("paywall") == rule.scope_name)
    return out.filter(pl.col("country") == str(params["country"])) if "country" in params else out


def _daily(
    spend_rows: pl.DataFrame, scoped: pl.DataFrame, rule: RollbackRule, params: Mapping[str, Any], days: list[date]
) -> list[float | None]:
    """Spend per day (None: a day whose spend includes an amount that could not be converted).

    Campaigns and creatives read the cleaned spend as the reports do; a paywall has no spend of
    its own, so it reads the signals' spend allocated to it by installs (the payback cube's rule).
    A day without rows spent nothing."""
    if rule.scope_entity == "paywall":
        frame = scoped.select(pl.col("cohort_date").alias("day"), "spend")
    else:
        frame = spend_rows.filter(
            pl.col("campaign" if rule.scope_entity == "campaign" else "creative") == rule.scope_name
        )
        if rule.scope_entity == "creative" and "campaign" in params:
            frame = frame.filter(pl.col("campaign") == str(params["campaign"]))
        frame = frame.select(pl.col("spend_date").alias("day"), "spend")
    sums = {
        row["day"]: (None if row["unknown"] else float(row["spend"] or 0.0))
        for row in frame.group_by("day")
        .agg(pl.col("spend").sum(), pl.col("spend").is_null().any().alias("unknown"))
        .iter_rows(named=True)
    }
    return [sums.get(d, 0.0) for d in days]


# --------------------------------------------------------------------------------- metrics


@dataclass(frozen=True)
class _Measure:
    """A metric on both sides, and its test statistic on a scale where the threshold is 0.

    `estimate` and `se` are on that scale (`to_metric` maps an end of the sequence back to metric
    units); `problem` says why there is no number."""

    observed: float | None
    baseline: float | None
    threshold: float | None
    estimate: float
    se: float
    n_total: float
    sample: int
    to_metric: Callable[[float], float]
    problem: str | None = None
    # Revenue metrics: the users the window holds (REVENUE_MIN_SAMPLE applies to them).
    revenue_users: int | None = None


def _sum(frame: pl.DataFrame, column: str) -> float | None:
    """Σ column; None when a summand is unknown (an unconvertible amount, `action_signals`)."""
    if frame.height and frame[column].null_count():
        return None
    return float(frame[column].sum() or 0.0)


def _count(frame: pl.DataFrame, column: str) -> int:
    return int(frame[column].sum() or 0)


def _sample(rule: RollbackRule, window: pl.DataFrame, days: int, maturity: int) -> int:
    unit = rule.min_sample_unit
    if unit == "days":
        return days
    if unit == "matured_trials":
        return _count(window.filter(pl.col("complete_days") >= maturity), "trials")
    column = {"installs": "installs", "users": "installs", "trials": "trials", "purchases": "subscriptions"}[unit]
    if rule.metric in _HORIZON and unit in ("installs", "users"):
        window = window.filter(pl.col("complete_days") >= _HORIZON[rule.metric])
    return _count(window, column)


# The statistics of a relative rule and its verdict, as array functions: `_measure` and `_verdict` apply
# them to one rule's sums, the honesty harness (tests/transforms/actions/test_statistical_honesty.py) to a
# thousand simulated actions at every look, so what it measures is the rule the monitor applies.


def rate_against_baseline(
    successes_baseline: ArrayLike, trials_baseline: ArrayLike, successes: ArrayLike, trials: ArrayLike, multiple: float
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(p − v·p₀, its standard error, n + n₀): a rate since the change against v times its baseline.

    Why both variances: the baseline rate is an estimate too, and the line v·p₀ carries v² of its
    variance; the breach asks whether p lies below (or above) the line, so the line's noise counts."""
    s0, n0, s1, n1 = (np.asarray(x, dtype=np.float64) for x in (successes_baseline, trials_baseline, successes, trials))
    with np.errstate(divide="ignore", invalid="ignore"):
        p0, p1 = s0 / n0, s1 / n1
        se = np.sqrt(p1 * (1 - p1) / n1 + multiple * multiple * p0 * (1 - p0) / n0)
    return p1 - multiple * p0, se, n1 + n0


def count_against_baseline(
    installs_baseline: ArrayLike,
    exposure_baseline: ArrayLike,
    installs: ArrayLike,
    exposure: ArrayLike,
    multiple: float,
    *,
    per_install: bool,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(ln(x/(v·x₀)), √(1/N + 1/N₀), N + N₀) for CPI (`per_install`: spend per install) or installs per day.

    Why the log scale: installs are Poisson counts given the spend (or the days), so the log of the
    ratio has the standard error √(1/N₁ + 1/N₀) whatever the level, and a multiple v is a shift by ln v."""
    n0, e0, n1, e1 = (
        np.asarray(x, dtype=np.float64) for x in (installs_baseline, exposure_baseline, installs, exposure)
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        x0, x1 = (e0 / n0, e1 / n1) if per_install else (n0 / e0, n1 / e1)
        return np.log(x1 / (multiple * x0)), np.sqrt(1 / n1 + 1 / n0), n1 + n0


def revenue_against_baseline(
    baseline: Moments, current: Moments, cost_ratio: ArrayLike, multiple: float
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(relative change − (v − 1), its delta-method standard error, n + n₀) of a mean per user, scaled by
    `cost_ratio` = CPI₀/CPI₁ for ROAS (= ARPU / CPI with the spend known; 1 for ARPU)."""
    delta, se_delta, n_total = sequential.relative_mean_change(baseline, current)
    k = np.asarray(cost_ratio, dtype=np.float64)
    return (1.0 + delta) * k - 1.0 - (multiple - 1.0), se_delta * k, n_total


@dataclass(frozen=True)
class Judgement:
    """A rule's verdict on statistics whose threshold is 0 (arrays broadcast together)."""

    short: NDArray[np.bool_]  # below the rule's minimum sample: inconclusive (§4 step 3)
    undefined: NDArray[np.bool_]  # no number to judge: inconclusive
    revenue_short: NDArray[np.bool_]  # a revenue rule below `REVENUE_MIN_SAMPLE` users: inconclusive
    past: NDArray[np.bool_]  # the point estimate is past the line (what later `consecutive` checks count)
    run: NDArray[np.int64]  # `consecutive`: checks past the line among the last `consecutive`, this one included
    bound: FloatArray  # `confidence_sequence`: the sequence's end nearest the line (NaN otherwise)
    breach: NDArray[np.bool_]

    @property
    def inconclusive(self) -> NDArray[np.bool_]:
        return self.short | self.undefined | self.revenue_short


def judge(
    rule: RollbackRule,
    estimate: ArrayLike,
    se: ArrayLike,
    n_total: ArrayLike,
    sample: ArrayLike,
    *,
    revenue_users: ArrayLike | None = None,
    defined: ArrayLike = True,
    previous: Sequence[ArrayLike] = (),
) -> Judgement:
    """The verdict of `rule` (§4 steps 3-4): inconclusive below its minimum sample (and, for revenue, below
    `REVENUE_MIN_SAMPLE` users) or without a number; else a breach when the whole confidence sequence
    (the rule's α and N*) lies past the line, or for `consecutive` rules when this check and the
    `consecutive − 1` before it (`previous`: their `past` flags, oldest first) are all past it."""
    est = np.asarray(estimate, dtype=np.float64)
    short = np.asarray(sample, dtype=np.float64) < rule.min_sample_value
    undefined = ~np.asarray(defined, dtype=np.bool_) & ~short
    revenue_short = (
        np.zeros_like(short)
        if revenue_users is None
        else (np.asarray(revenue_users, dtype=np.float64) < sequential.REVENUE_MIN_SAMPLE) & ~short & ~undefined
    )
    conclusive = ~(short | undefined | revenue_short)
    worse: sequential.Worse = "higher" if rule.comparator == "gt" else "lower"
    past = conclusive & ((est > 0) if worse == "higher" else (est < 0))
    if rule.test == "consecutive":
        window = (
            [np.asarray(p, dtype=np.bool_) for p in previous[-(rule.consecutive - 1) :]] if rule.consecutive > 1 else []
        )
        run = sum((w.astype(np.int64) for w in window), past.astype(np.int64))
        bound = np.full(np.shape(est), np.nan)
        hit = run >= rule.consecutive
    else:
        assert rule.alpha is not None and rule.n_star is not None  # validated by RollbackRule
        verdict = sequential.breached(est, se, n_total, 0.0, worse, alpha=rule.alpha, n_star=rule.n_star)
        run, bound, hit = past.astype(np.int64), verdict.bound, verdict.breached
    return Judgement(short, undefined, revenue_short, past, np.asarray(run), bound, np.asarray(hit & conclusive))


def _none(rule: RollbackRule, sample: int, problem: str, observed: float | None = None) -> _Measure:
    return _Measure(observed, None, None, math.nan, math.nan, 0.0, sample, lambda x: x, problem)


def _measure(
    rule: RollbackRule, window: pl.DataFrame, base: pl.DataFrame, maturity: int, days: int, base_days: int
) -> _Measure:
    """The rule's metric since the change and in the baseline, by the metric's family."""
    sample = _sample(rule, window, days, maturity)
    if rule.metric in ("trial_rate", "trial_to_paid", "refund_rate"):
        return _measure_rate(rule, window, base, maturity, sample)
    if rule.metric in ("cpi", "installs_per_day"):
        return _measure_count(rule, window, base, days, base_days, sample)
    return _measure_revenue(rule, window, base, sample)


def _measure_rate(rule: RollbackRule, window: pl.DataFrame, base: pl.DataFrame, maturity: int, sample: int) -> _Measure:
    """A rate (binomial: successes of trials, installs or subscriptions)."""
    relative = rule.threshold_kind == "relative_to_baseline"
    v = rule.threshold_value
    metric = rule.metric
    if metric == "trial_to_paid":
        window = window.filter(pl.col("complete_days") >= maturity)
        base = base.filter(pl.col("complete_days") >= maturity)
    num, den = {
        "trial_rate": ("trials", "installs"),
        "trial_to_paid": ("trial_conversions", "trials"),
        "refund_rate": ("refunds_n", "subscriptions"),
    }[metric]
    n1 = _count(window, den)
    s1 = min(_count(window, num), n1)  # a user may start two trials: a rate is at most 1
    if n1 == 0:
        return _none(rule, sample, f"no {den} since the change")
    p1 = s1 / n1
    if not relative:
        se = math.sqrt(p1 * (1 - p1) / n1)
        return _Measure(p1, None, v, p1 - v, se, n1, sample, lambda x: x + v)
    n0 = _count(base, den)
    s0 = min(_count(base, num), n0)
    if n0 == 0:
        return _none(rule, sample, f"no {den} in the baseline window", p1)
    p0 = s0 / n0
    line = v * p0
    est, se, n_total = (float(x) for x in rate_against_baseline(s0, n0, s1, n1, v))
    return _Measure(p1, p0, line, est, se, n_total, sample, lambda x: x + line)


def _measure_count(
    rule: RollbackRule, window: pl.DataFrame, base: pl.DataFrame, days: int, base_days: int, sample: int
) -> _Measure:
    """Installs against spend (CPI) or days (installs per day)."""
    relative = rule.threshold_kind == "relative_to_baseline"
    v = rule.threshold_value
    metric = rule.metric
    # Installs as Poisson counts given the spend (or the days): the ratio is tested on the log
    # scale, where its standard error is √(1/N₁ + 1/N₀).
    n1 = _count(window, "installs")
    exposure1 = _sum(window, "spend") if metric == "cpi" else float(days)
    if exposure1 is None:
        return _none(rule, sample, "the spend since the change includes an amount that could not be converted")
    if n1 == 0 or exposure1 <= 0:
        return _none(rule, sample, "no installs since the change" if n1 == 0 else "no spend since the change")
    x1 = exposure1 / n1 if metric == "cpi" else n1 / exposure1
    if not relative:
        return _Measure(
            x1,
            None,
            v,
            math.log(x1 / v) if v > 0 else math.inf,
            1 / math.sqrt(n1),
            n1,
            sample,
            lambda e: v * math.exp(e),
        )
    n0 = _count(base, "installs")
    exposure0 = _sum(base, "spend") if metric == "cpi" else float(base_days)
    if exposure0 is None:
        return _none(rule, sample, "the baseline spend includes an amount that could not be converted", x1)
    if n0 == 0 or exposure0 <= 0:
        return _none(rule, sample, "no installs or spend in the baseline window", x1)
    x0 = exposure0 / n0 if metric == "cpi" else n0 / exposure0
    line = v * x0
    est, se, n_total = (
        float(x) for x in count_against_baseline(n0, exposure0, n1, exposure1, v, per_install=metric == "cpi")
    )
    return _Measure(x1, x0, line, est, se, n_total, sample, lambda e: line * math.exp(e))


def _measure_revenue(rule: RollbackRule, window: pl.DataFrame, base: pl.DataFrame, sample: int) -> _Measure:
    """Revenue per user at the metric's horizon (ROAS divides by the CPI)."""
    relative = rule.threshold_kind == "relative_to_baseline"
    v = rule.threshold_value
    metric = rule.metric
    # Revenue: per-user net revenue at the horizon, Moments(n = installs, Σx, Σx²).
    horizon = _HORIZON[metric]
    window = window.filter(pl.col("complete_days") >= horizon)
    base = base.filter(pl.col("complete_days") >= horizon)
    m1, spend1 = _moments(window, horizon)
    if m1 is None:
        return _none(rule, sample, "the revenue since the change includes an amount that could not be converted")
    users = int(m1.n)
    if users == 0:
        return _none(rule, sample, f"no cohort since the change is {horizon} days old yet")
    mean1 = float(m1.mean)
    if metric == "roas_d7" and (spend1 is None or spend1 <= 0):
        return _none(rule, sample, "no known spend on the matured cohorts since the change")
    cpi1 = (spend1 or 0.0) / users if metric == "roas_d7" else 1.0
    x1 = mean1 / cpi1
    sd1 = math.sqrt(max(float(m1.variance), 0.0)) if users > 1 else math.nan
    if not relative:
        se = sd1 / math.sqrt(users) / cpi1
        return _Measure(x1, None, v, x1 - v, se, users, sample, lambda e: e + v, revenue_users=users)
    m0, spend0 = _moments(base, horizon)
    if m0 is None or (metric == "roas_d7" and (spend0 is None or spend0 <= 0)) or int(m0.n) == 0:
        return _none(rule, sample, "no usable baseline (no matured cohorts, no spend or unconvertible amounts)", x1)
    cpi0 = (spend0 or 0.0) / float(m0.n) if metric == "roas_d7" else 1.0
    x0 = float(m0.mean) / cpi0
    if x0 <= 0:
        return _none(rule, sample, "the baseline is zero: a relative threshold has nothing to be relative to", x1)
    # ROAS = ARPU / CPI, with the spend known: the ratio scales by the CPIs.
    est, se, n_total = (float(x) for x in revenue_against_baseline(m0, m1, cpi0 / cpi1, v))
    return _Measure(x1, x0, v * x0, est, se, n_total, sample, lambda e: x0 * (1.0 + e + v - 1.0), revenue_users=users)


def _moments(frame: pl.DataFrame, horizon: int) -> tuple[Moments | None, float | None]:
    s1, s2 = _sum(frame, f"net_rev_d{horizon}"), _sum(frame, f"net_rev_sq_d{horizon}")
    if s1 is None or s2 is None:
        return None, None
    return Moments.of(_count(frame, "installs"), s1, s2), _sum(frame, "spend")


def _verdict(rule: RollbackRule, m: _Measure, previous: Sequence[bool]) -> Outcome:
    j = judge(
        rule,
        m.estimate,
        m.se,
        m.n_total,
        m.sample,
        revenue_users=m.revenue_users,
        defined=m.problem is None,
        previous=previous,
    )
    needed = rule.min_sample_value
    if j.short:
        return Outcome(
            "inconclusive",
            m.observed,
            None,
            m.threshold,
            m.baseline,
            m.sample,
            f"{m.sample} {rule.min_sample_unit} since the change, the rule needs {needed}",
        )
    if j.undefined:
        return Outcome("inconclusive", m.observed, None, m.threshold, m.baseline, m.sample, m.problem or "")
    if j.revenue_short:
        return Outcome(
            "inconclusive",
            m.observed,
            None,
            m.threshold,
            m.baseline,
            m.sample,
            f"{m.revenue_users} users on matured cohorts since the change; a revenue rule needs "
            f"{sequential.REVENUE_MIN_SAMPLE}",
        )
    past = bool(j.past)
    if rule.test == "consecutive":
        bound = m.observed
        text = (
            f"{'past' if past else 'within'} the threshold on this check; {int(j.run)} of the last {rule.consecutive}"
        )
    else:
        raw = float(j.bound)
        bound = m.to_metric(raw) if math.isfinite(raw) else None
        side = "lower" if rule.comparator == "gt" else "upper"
        text = f"{side} confidence bound {_fmt(bound)} vs threshold {_fmt(m.threshold)}"
    status: Status = "breach" if bool(j.breach) else "ok"
    return Outcome(
        status,
        m.observed,
        bound,
        m.threshold,
        m.baseline,
        m.sample,
        f"{rule.metric} {_fmt(m.observed)} (baseline {_fmt(m.baseline)}); {text}",
        past,
    )


def _fmt(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{value:.4g}"


# --------------------------------------------------------------------------------- spend, SRM


def _daily_spend(rule: RollbackRule, days: list[float | None], base_days: list[float | None]) -> Outcome:
    """k-of-k: the last `consecutive` complete days since the change all past the threshold."""
    sample = len(days)
    baseline = None
    if rule.threshold_kind == "relative_to_baseline":
        if any(d is None for d in base_days):
            return Outcome(
                "inconclusive",
                None,
                None,
                None,
                None,
                sample,
                "the baseline spend includes an amount that could not be converted",
            )
        baseline = sum(d or 0.0 for d in base_days) / len(base_days)
        threshold = rule.threshold_value * baseline
    else:
        threshold = rule.threshold_value
    observed = days[-1] if days else None
    if sample < rule.min_sample_value or sample == 0:
        return Outcome(
            "inconclusive",
            observed,
            None,
            threshold,
            baseline,
            sample,
            f"{sample} complete days since the change, the rule needs {rule.min_sample_value}",
        )
    last = days[-rule.consecutive :]
    if any(d is None for d in last):
        return Outcome(
            "inconclusive",
            observed,
            None,
            threshold,
            baseline,
            sample,
            "a day's spend includes an amount that could not be converted",
        )
    values = [float(d or 0.0) for d in last]

    def past(x: float) -> bool:
        return x > threshold if rule.comparator == "gt" else x < threshold

    hit = len(values) == rule.consecutive and all(past(x) for x in values)
    bound = min(values) if rule.comparator == "gt" else max(values)
    text = (
        f"daily_spend {_fmt(observed)} on the last complete day (threshold {_fmt(threshold)}"
        f"{'' if baseline is None else f', baseline {_fmt(baseline)} a day'}); "
        f"{sum(past(x) for x in values)} of the last {rule.consecutive} days past it"
    )
    return Outcome("breach" if hit else "ok", observed, bound, threshold, baseline, sample, text, past(values[-1]))


def _srm(rule: RollbackRule, window: pl.DataFrame, params: Mapping[str, Any]) -> Outcome:
    """The arms are the `offer` labels of the paywall's users in the test's country: the signals
    know a user's paywall and offer of the install day, nothing else, so an arm is observable only
    when control and treatment are different offers (a test of two designs of one product is not)."""
    control, treatment = params.get("control_offer"), params.get("treatment_offer")
    if control is None or treatment is None or control == treatment or NONE_LABEL in (control, treatment):
        return Outcome(
            "inconclusive",
            None,
            None,
            rule.threshold_value,
            None,
            0,
            "the offer test's arms cannot be told apart in the signals (they need two different offers)",
        )
    counts = [_count(window.filter(pl.col("offer") == str(arm)), "paywall_users") for arm in (control, treatment)]
    split = _split(params)
    unit_sample = sum(counts) if rule.min_sample_unit in ("users", "installs") else _count(window, "paywall_users")
    if unit_sample < rule.min_sample_value:
        return Outcome(
            "inconclusive",
            None,
            None,
            rule.threshold_value,
            None,
            unit_sample,
            f"{unit_sample} paywall users since the change, the rule needs {rule.min_sample_value}",
        )
    p = float(srm_p_value(np.array(counts, dtype=np.float64), np.array(split)))
    hit = p < rule.threshold_value
    text = (
        f"arms {control}: {counts[0]}, {treatment}: {counts[1]} paywall users, planned split "
        f"{split[0]:.2f}/{split[1]:.2f}; χ² p = {p:.3g} (threshold {rule.threshold_value:g})"
    )
    return Outcome("breach" if hit else "ok", p, p, rule.threshold_value, None, unit_sample, text, hit)


def _split(params: Mapping[str, Any]) -> tuple[float, float]:
    """(control, treatment) weights: `split` as {control, treatment} or the treatment's share."""
    split = params.get("split")
    if isinstance(split, Mapping) and {"control", "treatment"} <= set(split):
        return float(split["control"]), float(split["treatment"])
    if isinstance(split, int | float) and 0 < float(split) < 1:
        return 1.0 - float(split), float(split)
    return DEFAULT_SPLIT
