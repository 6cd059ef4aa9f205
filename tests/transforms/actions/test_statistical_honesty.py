"""Statistical honesty of the rules the engine ships, on seeded worlds whose truth is planted (issues 18, 31).

Issue 18: "An A/A harness of at least 1 000 seeded equal-arm worlds proposes in at most 5 % of them and rolls
back in at most 5 % (sequential checking every six hours must not inflate this: use an anytime-valid rule);
planted −25 % effects are detected in at least 80 %." Every decision below is the engine's own:
`transforms.actions.decisions` (the proposal rules with their floors, prior, margins and bars, which the
generators in `proposals` call for each subject) and `transforms.actions.monitoring` (the monitor's
statistics and verdict) applied to the rollback rules `proposals` attaches to its actions, under the default
policy. The harness writes no threshold of its own: change one in the engine and these rates change.

"Proposed" is what a user sees: the engine opens an action whenever `signal` holds (a `draft` when a
guardrail fails, `ready` when all pass). "Rolled back" is a breach of a rule whose `on_breach` is
`rollback` at any of the monitor's six-hourly checks of the observation window. Every world is drawn
from one seeded generator, so the rates are the same on every run; docs/actions-engine.md records them.

Where the shipped rule misses the issue's bar the test says so and is marked `xfail(strict=True)` with the
measured figure: the bar is not lowered, and a fix of the engine turns the mark into a failure to remove.
The last two tests check that the harness's arrays are what the engine reads from `action_signals` rows.
"""

# ruff: noqa: RUF002, RUF003  (the docstrings and comments quote the design note's formulas)

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta

import numpy as np
import polars as pl
import pytest
from numpy.typing import NDArray

from transforms.actions import decisions as dec
from transforms.actions import monitoring as mon
from transforms.actions import proposals as gen
from transforms.actions import statistics as st
from transforms.actions.policy import DEFAULT
from transforms.actions.rules import RollbackRule
from transforms.reports.schemas import ACTION_SIGNAL_SCHEMA, CLEAN_SPEND_SCHEMA, ORGANIC

WORLDS = 1000
P = DEFAULT.p_decision  # the bar every proposal rule reads from the policy

Ints = NDArray[np.int64]


def revenue_moments(rng: np.random.Generator, installs: Ints, scale: float) -> st.Moments:
    """Per-user net revenue as subscription revenue looks (§2.3): 90 % zeros, payers log-normal around $10."""
    width = int(installs.max())
    paid = rng.random((len(installs), width)) < 0.10
    revenue = np.where(paid, rng.lognormal(np.log(10.0), 0.5, paid.shape), 0.0) * scale
    revenue[np.arange(width)[None, :] >= installs[:, None]] = 0.0
    return st.Moments.of(installs, revenue.sum(axis=1), (revenue * revenue).sum(axis=1))


def rate(flags: NDArray[np.bool_]) -> str:
    return f"{flags.mean():.1%}"


# ---------------------------------------------------------------- (a) creative pause


def pause(conversions: Ints, trials: Ints, margin: float = dec.PAUSE_MARGIN) -> dec.PauseDecision:
    """The engine's creative_pause rule on worlds × creatives; spend follows the trials (one cost per trial)."""
    return dec.creative_pause(conversions, trials, trials.astype(float), P, margin=margin)


def test_creative_pause_aa_proposes_in_at_most_5_percent_of_worlds() -> None:
    rng = np.random.default_rng(101)
    rates = rng.uniform(0.15, 0.50, WORLDS)[:, None]  # matured trial→paid, the same for all four creatives
    # From 5 matured trials up: the 30/60 floors gate `ready` (minimum_cohort_size), not the proposal.
    trials = rng.integers(5, 401, (WORLDS, 4))
    conversions = rng.binomial(trials, rates)
    proposed = pause(conversions, trials).signal.any(axis=1)
    assert proposed.mean() <= 0.05, f"A/A creative pauses proposed in {rate(proposed)} of worlds"
    # The harness can fail: the same rule without its 20 % margin pauses a healthy creative more often.
    no_margin = pause(conversions, trials, margin=0.0).signal.any(axis=1)
    assert no_margin.mean() > 0.05, f"A/A creative pauses without the margin: {rate(no_margin)} of worlds"


def planted_pause(seed: int, gap: float, trials_each: int) -> dec.PauseDecision:
    """Four creatives with `trials_each` matured trials; creative 0 converts `gap` worse than the others."""
    rng = np.random.default_rng(seed)
    rates = np.repeat(rng.uniform(0.20, 0.50, WORLDS)[:, None], 4, axis=1)
    rates[:, 0] *= 1.0 - gap
    trials = np.full((WORLDS, 4), trials_each)
    return pause(rng.binomial(trials, rates), trials)


def test_creative_pause_detects_a_planted_40_percent_gap() -> None:
    # The note's §5.3 example gap, at 500 matured trials per creative.
    decided = planted_pause(102, 0.40, 500)
    assert decided.signal[:, 0].mean() >= 0.80, f"planted weak creative paused in {rate(decided.signal[:, 0])}"
    wrong = decided.signal[:, 1:].any(axis=1)
    assert wrong.mean() <= 0.05, f"a healthy creative paused in {rate(wrong)} of worlds"


@pytest.mark.xfail(
    strict=True,
    reason="issue 31: the shipped pause rule finds a -25 % gap in 10.0 % of worlds at 500 matured trials per "
    "creative (the gap is barely past its 20 % margin; 80.3 % at 6 000 trials)",
)
def test_creative_pause_detects_a_planted_25_percent_gap() -> None:
    decided = planted_pause(103, 0.25, 500)
    assert decided.signal[:, 0].mean() >= 0.80, f"planted -25 % creative paused in {rate(decided.signal[:, 0])}"


# ---------------------------------------------------------------- (b) budget shift


def shift(source: st.Moments, target: st.Moments, horizon_days: int = 30) -> dec.ShiftDecision:
    """The engine's budget_shift rule on one country at one CPI (the log-scale lift does not see the CPI)."""
    return dec.budget_shift(
        source.mean,
        source.variance / source.n,
        source.n,
        target.mean,
        target.variance / target.n,
        target.n,
        P,
        horizon_days,
    )


def equal_campaigns(seed: int, campaigns: int, worlds: int = WORLDS) -> list[st.Moments]:
    """Campaigns paying back alike, 200 (the floor) to 3 000 installs each in the 28 compared cohort days."""
    rng = np.random.default_rng(seed)
    return [revenue_moments(rng, rng.integers(dec.SHIFT_MIN_INSTALLS, 3001, worlds), 1.0) for _ in range(campaigns)]


def shifts_proposed(campaigns: Sequence[st.Moments], horizon_days: int = 30) -> NDArray[np.bool_]:
    """Worlds where the engine proposes any shift: it evaluates every ordered pair of paid campaigns."""
    out = np.zeros(len(campaigns[0].n), dtype=bool)
    for i, source in enumerate(campaigns):
        for j, target in enumerate(campaigns):
            if i != j:
                out |= shift(source, target, horizon_days).signal
    return out


@pytest.mark.xfail(
    strict=True,
    reason="issue 31: two equal campaigns get a shift proposed (a draft; 0.1 % ready) in 6.2 % of these 4 000 "
    "worlds (6.0 % of 10 000 others): each direction is decided at 0.95, so a pair errs up to twice as often",
)
def test_budget_shift_aa_proposes_in_at_most_5_percent_of_worlds() -> None:
    # 4 000 worlds: the rule sits near the bar, where 1 000 worlds' noise (±0.7 points) would decide it.
    proposed = shifts_proposed(equal_campaigns(203, 2, 4 * WORLDS))
    assert proposed.mean() <= 0.05, f"A/A budget shifts proposed in {rate(proposed)} of worlds"


def test_budget_shift_aa_at_day_14_proposes_in_at_most_5_percent_of_worlds() -> None:
    # Young data (D = 14) decides at the stricter bar 1 − (1 − p)/2.
    proposed = shifts_proposed(equal_campaigns(204, 2, 4 * WORLDS), horizon_days=14)
    assert proposed.mean() <= 0.05, f"A/A budget shifts at D = 14 proposed in {rate(proposed)} of worlds"


@pytest.mark.xfail(
    strict=True,
    reason="issue 31: a workspace of four equal campaigns (12 ordered pairs) gets a shift proposed in 23.0 % "
    "of worlds; nothing corrects the engine's shift rule for the number of pairs it evaluates",
)
def test_budget_shift_aa_among_four_campaigns_proposes_in_at_most_5_percent_of_worlds() -> None:
    proposed = shifts_proposed(equal_campaigns(205, 4))
    assert proposed.mean() <= 0.05, f"A/A budget shifts among four campaigns proposed in {rate(proposed)} of worlds"


def test_budget_shift_detects_a_source_paying_back_25_percent_less() -> None:
    # 3,000 installs per campaign; the source's ROAS is 25 % below the target's (the target's lift +33 %).
    rng = np.random.default_rng(206)
    installs = np.full(WORLDS, 3000)
    source = revenue_moments(rng, installs, 0.75)
    target = revenue_moments(rng, installs, 1.0)
    detected = shift(source, target).signal
    assert detected.mean() >= 0.80, f"planted budget shift proposed in {rate(detected)} of worlds"
    backwards = shift(target, source).signal
    assert not backwards.any(), f"the shift proposed the wrong way in {rate(backwards)} of worlds"


def test_budget_shift_sees_a_several_fold_gap_on_a_few_hundred_installs() -> None:
    # The demo's gap: one campaign returns about 5x the other's revenue per install, 300 installs each; on the
    # log scale the N(0, 0.3²) prior does not read it as a coin flip (statistics.log_ratio_posterior).
    rng = np.random.default_rng(207)
    installs = np.full(WORLDS, 300)
    detected = shift(revenue_moments(rng, installs, 0.2), revenue_moments(rng, installs, 1.0)).signal
    assert detected.mean() >= 0.80, f"a 5x gap proposed in {rate(detected)} of worlds"


# ---------------------------------------------------------------- (c) offer test

COUNTRIES = 6


def offers(paid: Ints, users: Ints) -> dec.OfferDecision:
    """The engine's offer_test rule for each (world, country): the offer here against the other countries."""
    return dec.offer_test(
        paid, users, paid.sum(axis=1, keepdims=True) - paid, users.sum(axis=1, keepdims=True) - users, P
    )


def test_offer_test_aa_proposes_in_at_most_5_percent_of_worlds() -> None:
    # Six countries answering an offer alike (paywall user → paid at one rate per world); each country is
    # compared with the other five, so a world has six chances to propose.
    rng = np.random.default_rng(401)
    rates = rng.uniform(0.03, 0.30, WORLDS)[:, None]
    users = rng.integers(50, 2001, (WORLDS, COUNTRIES))
    proposed = offers(rng.binomial(users, rates), users).signal.any(axis=1)
    assert proposed.mean() <= 0.05, f"A/A offer tests proposed in {rate(proposed)} of worlds"


def planted_offer(seed: int, factor: float, users_each: int) -> dec.OfferDecision:
    rng = np.random.default_rng(seed)
    rates = np.repeat(rng.uniform(0.05, 0.25, WORLDS)[:, None], COUNTRIES, axis=1)
    rates[:, 0] *= factor
    users = np.full((WORLDS, COUNTRIES), users_each)
    return offers(rng.binomial(users, rates), users)


def test_offer_test_detects_a_country_converting_1_8_times_as_often() -> None:
    # The demo's planted story (transforms/demo.py: pro_weekly_699 converts 1.8× as often in the US), at 600
    # paywall users in the country and 600 in each other one.
    decided = planted_offer(402, 1.8, 600)
    assert decided.signal[:, 0].mean() >= 0.80, f"the planted country proposed in {rate(decided.signal[:, 0])}"
    wrong = decided.signal[:, 1:].any(axis=1)
    assert wrong.mean() <= 0.05, f"another country proposed in {rate(wrong)} of worlds"


def test_offer_test_detects_the_other_countries_converting_25_percent_less() -> None:
    # The issue's −25 %: elsewhere converts at 0.75× the country's rate, i.e. the country at 1.33×, barely
    # past the rule's 1.25× margin, so it takes 10 000 paywall users per country.
    decided = planted_offer(403, 1 / 0.75, 10_000)
    assert decided.signal[:, 0].mean() >= 0.80, f"the planted country proposed in {rate(decided.signal[:, 0])}"
    assert decided.signal[:, 1:].any(axis=1).mean() <= 0.05


# ---------------------------------------------------------------- (d) the monitor

BASELINE_DAYS = 14  # both action types' rules compare with the 14 days before the change
CHECKS_PER_DAY = 4  # the monitor runs after every six-hourly refresh
PENDING, INCONCLUSIVE, OK, BREACH = 0, 1, 2, 3
SHIFT_RULES = gen.shift_rollback_rules("target", BASELINE_DAYS, DEFAULT.observation_days)
PAUSE_RULES = gen.pause_rollback_rules("campaign", DEFAULT.observation_days)
RULES = {"budget_shift": SHIFT_RULES, "creative_pause": PAUSE_RULES}


def watched_world(
    rng: np.random.Generator,
    worlds: int,
    installs_per_day: float,
    *,
    installs: float = 1.0,
    trial_rate: float = 1.0,
    revenue: float = 1.0,
) -> dict[str, dict[str, NDArray[np.float64]]]:
    """Per world and cohort day, the baseline's 14 days and the window's, as `action_signals` sums them.

    Before the change: Poisson installs at a fixed daily spend (CPI 1), 30 % of installs start a trial,
    10 % pay a log-normal amount around $10 by day 7. Since the change each planted factor scales its
    quantity: `installs` at the same spend (CPI rises, installs per day fall), `trial_rate`, `revenue`
    per install.
    """
    days = DEFAULT.observation_days
    out = {}
    for side, n_days, f_installs, f_trials, f_revenue in (
        ("baseline", BASELINE_DAYS, 1.0, 1.0, 1.0),
        ("window", days, installs, trial_rate, revenue),
    ):
        n = rng.poisson(installs_per_day * f_installs, (worlds, n_days))
        payers = rng.binomial(n, 0.10)
        amounts = rng.lognormal(np.log(10.0), 0.5, int(payers.sum())) * f_revenue
        cell = np.repeat(np.arange(payers.size), payers.ravel())
        out[side] = {
            "installs": n.astype(float),
            "spend": np.full((worlds, n_days), float(installs_per_day)),
            "trials": rng.binomial(n, 0.30 * f_trials).astype(float),
            "net": np.bincount(cell, amounts, payers.size).reshape(payers.shape),
            "net_sq": np.bincount(cell, amounts * amounts, payers.size).reshape(payers.shape),
        }
    return out


def measured(rule: RollbackRule, world: dict[str, dict[str, NDArray[np.float64]]], today: int) -> tuple:
    """The monitor's statistics of `rule` at a check on day `today` of the window (the change took effect
    at midnight of day 0, so the window holds days 0 … today − 1, at most `window.max_days`); a cohort of
    day d has `today − d` complete days. Returns (estimate, se, n_total, sample, revenue users, defined)."""
    base, since = world["baseline"], world["window"]
    v = rule.threshold_value
    days = min(today, rule.window_max_days)
    n1 = since["installs"][:, :days].sum(axis=1)
    if rule.metric == "trial_rate":
        b = (base["trials"].sum(axis=1), base["installs"].sum(axis=1))
        est, se, total = mon.rate_against_baseline(*b, since["trials"][:, :days].sum(axis=1), n1, v)
        return est, se, total, n1, None, n1 > 0
    if rule.metric == "cpi":
        b = (base["installs"].sum(axis=1), base["spend"].sum(axis=1))
        est, se, total = mon.count_against_baseline(*b, n1, since["spend"][:, :days].sum(axis=1), v, per_install=True)
        return est, se, total, n1, None, n1 > 0
    if rule.metric == "installs_per_day":
        est, se, total = mon.count_against_baseline(
            base["installs"].sum(axis=1), BASELINE_DAYS, n1, max(days, 1), v, per_install=False
        )
        return est, se, total, n1, None, n1 > 0
    assert rule.metric == "roas_d7", rule.metric
    matured = max(0, min(days, today - 7 + 1))  # cohorts with ≥ 7 complete days
    users = since["installs"][:, :matured].sum(axis=1)
    spend = since["spend"][:, :matured].sum(axis=1)
    m0 = st.Moments.of(base["installs"].sum(axis=1), base["net"].sum(axis=1), base["net_sq"].sum(axis=1))
    m1 = st.Moments.of(users, since["net"][:, :matured].sum(axis=1), since["net_sq"][:, :matured].sum(axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        cost_ratio = (base["spend"].sum(axis=1) / m0.n) / (spend / users)
    est, se, total = mon.revenue_against_baseline(m0, m1, cost_ratio, v)
    return est, se, total, users, users, users > 0


def watch(
    rules: Sequence[RollbackRule], world: dict[str, dict[str, NDArray[np.float64]]], worlds: int
) -> dict[str, list[NDArray[np.int64]]]:
    """Each rule's status at every six-hourly check of the observation window, per world, as the monitor
    decides it (`monitoring.judge` with the rule's `previous` checks); the spend-overshoot alert is not
    simulated (it rolls nothing back)."""
    statuses: dict[str, list[NDArray[np.int64]]] = {r.id: [] for r in rules if r.metric != "daily_spend"}
    past: dict[str, list[NDArray[np.bool_]]] = {r.id: [] for r in rules}
    for check in range(1, DEFAULT.observation_days * CHECKS_PER_DAY + 1):
        hours = check * 24 // CHECKS_PER_DAY
        for rule in rules:
            if rule.metric == "daily_spend":
                continue
            if hours < rule.grace_hours:
                past[rule.id].append(np.zeros(worlds, dtype=bool))
                statuses[rule.id].append(np.full(worlds, PENDING))
                continue
            est, se, total, sample, users, defined = measured(rule, world, hours // 24)
            j = mon.judge(rule, est, se, total, sample, revenue_users=users, defined=defined, previous=past[rule.id])
            past[rule.id].append(j.past)
            statuses[rule.id].append(np.select([j.breach, j.inconclusive], [BREACH, INCONCLUSIVE], OK))
    return statuses


def rolled_back(action_type: str, world: dict[str, dict[str, NDArray[np.float64]]], worlds: int) -> NDArray[np.bool_]:
    """Worlds where a rollback rule of the action breached at some check (the policy's auto_rollback is on)."""
    statuses = watch(RULES[action_type], world, worlds)
    stopping = [r.id for r in RULES[action_type] if r.on_breach == "rollback" and r.id in statuses]
    return np.any([np.any(np.array(statuses[i]) == BREACH, axis=0) for i in stopping], axis=0)


@pytest.mark.parametrize("installs_per_day", [40, 120])
@pytest.mark.parametrize("action_type", ["budget_shift", "creative_pause"])
def test_monitor_aa_rolls_back_in_at_most_5_percent_of_worlds(action_type: str, installs_per_day: int) -> None:
    # 40 installs a day is a campaign of the demo; 120 the note's §2.6 volume (30 per six hours).
    rng = np.random.default_rng(301)
    rolled = rolled_back(action_type, watched_world(rng, WORLDS, installs_per_day), WORLDS)
    assert rolled.mean() <= 0.05, f"A/A {action_type} rolled back in {rate(rolled)} of worlds"


MISSES = {  # the measured catch rates of the shipped rules at 120 installs a day (issue 31)
    ("budget_shift", "trial_rate"): "10.5 %: the rule rolls back below 0.80x baseline",
    ("budget_shift", "installs"): "8.3 %: CPI must pass 1.30x or ROAS fall below 0.80x",
    ("budget_shift", "revenue"): "6.6 %: ROAS must fall below 0.80x, on matured cohorts only",
    ("creative_pause", "trial_rate"): "37.5 %: the rule rolls back below 0.85x baseline",
    ("creative_pause", "installs"): "73.5 %: installs per day must fall below 0.75x, exactly the planted drop",
}


@pytest.mark.parametrize(
    ("action_type", "harm"),
    [
        pytest.param(a, h, marks=pytest.mark.xfail(strict=True, reason=f"issue 31: caught in {why}"))
        for (a, h), why in MISSES.items()
    ],
)
def test_monitor_catches_a_planted_25_percent_harm(action_type: str, harm: str) -> None:
    # −25 % on one quantity since the change, at the note's §2.6 volume of 120 installs a day.
    rng = np.random.default_rng(302)
    rolled = rolled_back(action_type, watched_world(rng, WORLDS, 120, **{harm: 0.75}), WORLDS)
    assert rolled.mean() >= 0.80, f"a -25 % {harm} under a {action_type} rolled back in {rate(rolled)} of worlds"


STRICT_REVENUE_RULE = RollbackRule.from_dict(
    {
        **SHIFT_RULES[2].to_dict(),
        "threshold": {"kind": "relative_to_baseline", "value": 0.95},
        "min_sample": {"unit": "users", "value": 100},
    }
)


def test_a_strict_revenue_rule_needs_the_minimum_sample() -> None:
    # A strict relative revenue rule (any fall of ROAS past 0.95x baseline, 100 users), shaped
    # like the shift's rb3 otherwise. Heavy-tailed revenue makes small windows look worse than they are, so
    # below REVENUE_MIN_SAMPLE users the monitor answers inconclusive whatever the rule's own minimum.
    rng = np.random.default_rng(303)
    statuses = watch([STRICT_REVENUE_RULE], watched_world(rng, WORLDS, 100), WORLDS)[STRICT_REVENUE_RULE.id]
    rolled = np.any(np.array(statuses) == BREACH, axis=0)
    assert rolled.mean() <= 0.05, f"A/A rollbacks by a strict revenue rule: {rate(rolled)} of worlds"


# ---------------------------------------------------------------- the harness reads what the engine reads

THROUGH = date(2026, 11, 20)


def signal_row(cohort: date, complete_days: int, **values: object) -> dict[str, object]:
    row: dict[str, object] = {name: 0 for name in ACTION_SIGNAL_SCHEMA}
    row |= {"workspace_id": "ws_h", "cohort_date": cohort, "campaign": ORGANIC, "creative": "(none)"}
    row |= {"country": "US", "offer": "(none)", "paywall": "(none)", "complete_days": complete_days}
    for name in ACTION_SIGNAL_SCHEMA:
        if name.startswith("net_rev") or name == "spend":
            row[name] = 0.0
    return row | values


def context(registry: dict[str, gen.RegistryCampaign]) -> gen.Context:
    as_of = datetime.combine(THROUGH, datetime.min.time(), tzinfo=UTC) + timedelta(hours=6)
    return gen.Context("ws_h", as_of, THROUGH, DEFAULT, registry)


def campaign(name: str, creatives: Sequence[str] = ()) -> gen.RegistryCampaign:
    return gen.RegistryCampaign(
        name, "adacct_h", "sandbox", 10_000, "USD", "active", None, dict.fromkeys(creatives, "active")
    )


def test_the_generators_decide_the_harness_worlds_as_the_harness_does() -> None:
    """The same worlds written as `action_signals` rows and decided by the generators one subject at a time."""
    rng = np.random.default_rng(501)
    # Creative pause: worlds of four creatives, one converting worse, some small enough to fail the floors.
    rates = np.repeat(rng.uniform(0.15, 0.50, 12)[:, None], 4, axis=1)
    rates[::2, 0] *= 0.4
    trials = rng.integers(5, 401, (12, 4))
    conversions = rng.binomial(trials, rates)
    harness = pause(conversions, trials)
    names = [f"cr{i}" for i in range(4)]
    ctx = context({"k": campaign("k", names)})
    for w in range(12):
        rows = [
            signal_row(THROUGH - timedelta(days=20), 20, campaign="k", creative=names[i], installs=int(trials[w, i]),
                       trials=int(trials[w, i]), trial_conversions=int(conversions[w, i]), spend=float(trials[w, i]))
            for i in range(4)
        ]  # fmt: skip
        frame = pl.DataFrame(rows, schema=ACTION_SIGNAL_SCHEMA)
        for i in range(4):
            e = gen.evaluate_creative_pause(frame, ctx, names[i], "k")
            assert e is not None
            assert (e.signal, e.guardrails_pass) == (bool(harness.signal[w, i]), bool(harness.sample_ok[w, i]))
            assert e.confidence == pytest.approx(float(harness.p_worse[w, i]), abs=1e-12)
    assert harness.signal.any() and not harness.signal.all()

    # Budget shift: two campaigns, one country, CPI 1, the 28 cohort days with 30 complete days.
    sides = [revenue_moments(rng, np.full(12, n), s) for n, s in ((1500, 0.6), (1500, 1.0))]
    harness_shift = shift(*sides)
    ctx = context({"s": campaign("s"), "t": campaign("t")})
    for w in range(12):
        rows = []
        for name, m in zip(("s", "t"), sides, strict=True):
            for back in range(30, 58):  # all of it on the oldest day; the engine sums the window
                n = int(m.n[w]) if back == 57 else 0
                net, net_sq = (float(m.s1[w]), float(m.s2[w])) if back == 57 else (0.0, 0.0)
                rows.append(signal_row(THROUGH - timedelta(days=back), 30, campaign=name, creative=f"{name}_ad",
                                       installs=n, spend=float(n), net_rev_d30=net, net_rev_sq_d30=net_sq))  # fmt: skip
        e = gen.evaluate_budget_shift(pl.DataFrame(rows, schema=ACTION_SIGNAL_SCHEMA), ctx, "s", "t")
        assert e is not None
        assert e.signal == bool(harness_shift.signal[w])
        assert e.confidence == pytest.approx(float(harness_shift.chance_to_win[w]), abs=1e-12)
    assert harness_shift.signal.any() and not harness_shift.signal.all()

    # Offer test: six countries, the treatment offer converting better in the first in some worlds.
    paid_rates = np.repeat(rng.uniform(0.05, 0.25, 12)[:, None], COUNTRIES, axis=1)
    paid_rates[::2, 0] *= 1.8
    users = rng.integers(50, 801, (12, COUNTRIES))
    paid = rng.binomial(users, paid_rates)
    harness_offer = offers(paid, users)
    countries = ["US", "DE", "FR", "GB", "JP", "BR"]
    ctx = context({})
    for w in range(12):
        rows = []
        for g, country in enumerate(countries):
            for offer, n, s in (("treat", int(users[w, g]), int(paid[w, g])), ("ctrl", 20, 2)):
                rows.append(signal_row(THROUGH - timedelta(days=20), 20, country=country, offer=offer, paywall="pw",
                                       installs=n, paywall_users=n, subscriptions=s))  # fmt: skip
        frame = pl.DataFrame(rows, schema=ACTION_SIGNAL_SCHEMA)
        for g, country in enumerate(countries):
            e = gen.evaluate_offer_test(frame, ctx, "pw", country, "ctrl", "treat")
            assert e is not None
            assert e.signal == bool(harness_offer.signal[w, g])
            assert e.confidence == pytest.approx(float(harness_offer.p_up[w, g]), abs=1e-12)
    assert harness_offer.signal.any() and not harness_offer.signal.all()


def test_the_monitor_decides_the_harness_worlds_as_the_harness_does() -> None:
    """A few watched worlds written as `action_signals` rows and checked by `monitoring.evaluate` at every
    six-hourly check (with each rule's earlier checks as `previous`): the same status at every check."""
    effective = datetime.combine(THROUGH, datetime.min.time(), tzinfo=UTC)
    no_spend = pl.DataFrame(schema=CLEAN_SPEND_SCHEMA)
    for action_type, planted in (("budget_shift", {"trial_rate": 0.5}), ("creative_pause", {"installs": 0.7})):
        rules = [r for r in RULES[action_type] if r.metric != "daily_spend"]
        world = watched_world(np.random.default_rng(601), 2, 120, **planted)
        harness = watch(rules, world, 2)
        seen: set[int] = set()
        for w in range(2):
            sides = (("baseline", -BASELINE_DAYS, BASELINE_DAYS), ("window", 0, DEFAULT.observation_days))
            days = [
                (effective.date() + timedelta(days=d), world[side], k)
                for side, first, n_days in sides
                for k, d in enumerate(range(first, first + n_days))
            ]
            past: dict[str, list[bool]] = {r.id: [] for r in rules}
            for check in range(1, DEFAULT.observation_days * CHECKS_PER_DAY + 1):
                now = effective + timedelta(hours=check * 24 // CHECKS_PER_DAY)
                rows = [
                    signal_row(day, min(30, (now.date() - day).days), campaign=rules[0].scope_name, creative="ad",
                               installs=int(q["installs"][w, k]), spend=float(q["spend"][w, k]),
                               trials=int(q["trials"][w, k]), net_rev_d7=float(q["net"][w, k]),
                               net_rev_sq_d7=float(q["net_sq"][w, k]))
                    for day, q, k in days
                    if day < now.date()
                ]  # fmt: skip
                frame = pl.DataFrame(rows, schema=ACTION_SIGNAL_SCHEMA)
                for rule in rules:
                    outcome = mon.evaluate(rule, frame, no_spend, effective, now, previous=past[rule.id])
                    past[rule.id].append(outcome.past_threshold)
                    expected = harness[rule.id][check - 1][w]
                    assert outcome.status == ("pending", "inconclusive", "ok", "breach")[expected], (rule.id, check)
                    seen.add(int(expected))
        assert seen == {PENDING, INCONCLUSIVE, OK, BREACH}, (action_type, seen)
