# The data signals and guardrail details are written with the product's typography (→, ≥, ×, −).
# ruff: noqa: RUF003
"""The engine's generators on literal frames (tests/support/engine.py): each fires where the data
says so and stays silent where it does not; every guardrail's detail; fingerprints; ranking and cap."""

from __future__ import annotations

import dataclasses
import math
from datetime import date, timedelta

import polars as pl
import pytest

from tests.support.engine import FAST, MIXED, SLOW, WORLD, Campaign, context, signal_rows
from transforms.actions import proposals as gen
from transforms.actions.policy import DEFAULT
from transforms.actions.rules import render

THROUGH = date(2026, 11, 20)


def world(campaigns=WORLD) -> pl.DataFrame:
    return signal_rows("ws_test", THROUGH, campaigns)


def by_type(found: list[gen.Evaluation]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for e in found:
        out.setdefault(e.action_type, []).append(e.parameters)
    return out


def checks(e: gen.Evaluation) -> dict[str, dict]:
    return {c["check"]: c for c in e.content.guardrail_checks}


def test_the_planted_world_gives_the_shift_slow_to_fast_and_the_pause_of_the_weak_creative() -> None:
    found = gen.propose(world(), context(WORLD, THROUGH))
    assert by_type(found) == {
        "creative_pause": [{"creative": "weak_cr", "campaign": "mixed"}],
        "budget_shift": [{"from_campaign": "slow", "to_campaign": "fast", "amount_per_day": 20.0, "currency": "USD"}],
    }
    assert all(e.guardrails_pass for e in found), [c for e in found for c in e.content.guardrail_checks]
    shift = next(e for e in found if e.action_type == "budget_shift")
    assert shift.content.title == "Shift 20.00 USD/day from slow to fast"
    signals = {s["label"]: s["value"] for s in shift.content.data_signals}
    # ROAS 30d = Σ net / spend: fast 10 % payers × 20 / CPI 1 = 2.00; slow 5 % × 20 / 2 = 0.50.
    assert signals["ROAS 30d, fast"] == "2.00" and signals["ROAS 30d, slow"] == "0.50"
    assert signals["Daily budget, slow"] == "100.00 USD"
    # Rollback rules per §5.2, rendered from the machine-checkable rules.
    assert [r.metric for r in shift.rollback_rules] == ["cpi", "trial_rate", "roas_d7", "daily_spend"]
    assert render(shift.rollback_rules[0]).startswith("Roll back if CPI of campaign fast rises more than 30%")
    assert shift.rollback_rules[3].on_breach == "alert"


def test_the_guardrail_details_of_a_shift_say_the_numbers_they_were_decided_on() -> None:
    shift = gen.evaluate_budget_shift(world(), context(WORLD, THROUGH), "slow", "fast")
    assert shift is not None
    c = checks(shift)
    ev = shift.evidence
    # 28 cohort days with 30 complete days: 28 × 40 installs (rounded per country: 24 + 16).
    assert ev["source"]["installs"] == ev["target"]["installs"] == 28 * 40
    needed = ev["thresholds"]["needed_installs"]
    assert c["minimum_cohort_size"]["detail"] == (
        f"1120 installs in slow and 1120 in fast with 30 complete days (a +{ev['posterior']['lift'] * 100:.0f} % gap "
        f"needs ≥ {needed:.0f}; floor 200)"
    )
    post = ev["posterior"]
    assert c["statistical_confidence"]["detail"].startswith(
        f"{post['chance_to_win'] * 100:.1f} % probability fast's ROAS 30d exceeds slow's"
    )
    assert c["statistical_confidence"]["detail"].endswith("needs 95.0 % and risk ≤ 0.01")
    # Δ = min(20 % of 100, 20 % of 100, 10 % of the 280 managed) = 20.
    assert c["spend_change_within_limit"]["detail"] == (
        "moves 20.00 USD/day: 20 % of slow, 20 % of fast, 7 % of managed spend (limits 20 %/20 %/10 %; "
        "at least 5.00 USD)"
    )
    assert c["data_fresh"] == {
        "check": "data_fresh",
        "passed": True,
        "detail": "newest data is of 2026-11-20, 0 day(s) before 2026-11-20 (limit 2)",
    }
    assert c["cooldown_elapsed"]["detail"] == "no FloKit action on these entities ended in the last 7 days"
    assert c["no_conflicting_action"]["detail"] == "no other open action touches these campaigns or creatives"
    assert c["learning_phase_clear"]["detail"] == (
        "the platform reports no edit time for these campaigns (none recorded)"
    )


def test_a_client_amount_over_the_leg_cap_fails_the_spend_check() -> None:
    shift = gen.evaluate_budget_shift(world(), context(WORLD, THROUGH), "slow", "fast", amount=35.0)
    assert shift is not None and not shift.guardrails_pass
    assert checks(shift)["spend_change_within_limit"]["passed"] is False
    assert "moves 35.00 USD/day: 35 % of slow" in checks(shift)["spend_change_within_limit"]["detail"]


def test_equal_campaigns_and_equal_creatives_propose_nothing() -> None:
    same = [dataclasses.replace(FAST, name=n, creatives={f"{n}_a": (0.5, 6, 3), f"{n}_b": (0.5, 6, 3)}) for n in "abc"]
    assert gen.propose(world(same), context(same, THROUGH)) == []


def test_no_budget_known_means_no_shift_is_proposed() -> None:
    unknown = (dataclasses.replace(FAST, budget=None), SLOW, MIXED)
    found = gen.propose(world(unknown), context(unknown, THROUGH))
    assert "budget_shift" not in by_type(found) or all(
        "fast" not in (p["from_campaign"], p["to_campaign"]) for p in by_type(found)["budget_shift"]
    )
    assert gen.evaluate_budget_shift(world(unknown), context(unknown, THROUGH), "slow", "fast") is None


def test_young_data_compares_at_day_14_with_a_stricter_bar() -> None:
    young = signal_rows("ws_test", THROUGH, WORLD, days=20)
    shift = gen.evaluate_budget_shift(young, context(WORLD, THROUGH), "slow", "fast")
    assert shift is not None and shift.evidence["horizon_days"] == 14
    assert shift.evidence["thresholds"]["bar"] == pytest.approx(0.975)
    assert "ROAS 14d, fast" in {s["label"] for s in shift.content.data_signals}


def test_a_creative_pause_says_its_rates_and_prior() -> None:
    pause = gen.evaluate_creative_pause(world(), context(WORLD, THROUGH), "weak_cr", "mixed")
    assert pause is not None and pause.signal
    signals = {s["label"]: s["value"] for s in pause.content.data_signals}
    # Matured cohorts: complete_days ≥ 9 → 60 − 8 = 52 days × 6 trials; 1 vs 4 conversions a day.
    assert signals["Matured trials, weak_cr"] == str(52 * 6) and signals["Matured trials, rest of mixed"] == str(52 * 6)
    assert signals["Trial → paid, weak_cr"] == "16.7 %" and signals["Trial → paid, rest of mixed"] == "66.7 %"
    c = checks(pause)
    assert (
        c["spend_change_within_limit"]["detail"]
        == "pausing raises no spend; 1 other active ad(s) keep mixed delivering"
    )
    assert c["statistical_confidence"]["detail"].endswith("needs 95.0 %")
    assert "empirical-Bayes prior Beta centred on 41.7 %" in c["statistical_confidence"]["detail"]
    assert [r.metric for r in pause.rollback_rules] == ["installs_per_day", "cpi", "trial_rate"]


def test_the_last_active_ad_of_a_campaign_is_never_paused() -> None:
    alone = dataclasses.replace(MIXED, creatives={"weak_cr": (1.0, 6, 1)})
    ctx = context((FAST, SLOW, alone), THROUGH)
    # Alone in its campaign, it is both the campaign's rate and the only ad: nothing to compare, nothing to pause.
    pause = gen.evaluate_creative_pause(world((FAST, SLOW, alone)), ctx, "weak_cr", "mixed")
    assert pause is None or not pause.signal
    assert "creative_pause" not in by_type(gen.propose(world((FAST, SLOW, alone)), ctx))


def test_fingerprints_are_stable_and_name_type_subject_and_direction() -> None:
    a = gen.propose(world(), context(WORLD, THROUGH))
    b = gen.propose(world(), context(WORLD, THROUGH))
    assert [e.fingerprint for e in a] == [e.fingerprint for e in b] and a == b
    assert gen.fingerprint("ws", "budget_shift", ("slow", "fast"), "increase_target") != gen.fingerprint(
        "ws", "budget_shift", ("fast", "slow"), "increase_target"
    )
    assert len(a[0].fingerprint) == 64


def test_the_cap_keeps_the_highest_expected_impact() -> None:
    one = dataclasses.replace(DEFAULT, max_new_actions_per_refresh=1)
    found = gen.propose(world(), context(WORLD, THROUGH, policy=one))
    everything = gen.propose(world(), context(WORLD, THROUGH))
    assert [e.fingerprint for e in found] == [everything[0].fingerprint]
    assert everything[0].score >= everything[1].score > 0


def test_an_open_action_locks_its_campaigns_and_its_own_fingerprint() -> None:
    first = gen.propose(world(), context(WORLD, THROUGH))
    shift = next(e for e in first if e.action_type == "budget_shift")
    held = gen.OpenAction("act_1", "budget_shift", "ready", shift.fingerprint, shift.entities)
    again = gen.propose(world(), context(WORLD, THROUGH, open_actions=[held]))
    assert "budget_shift" not in by_type(again)
    other = gen.OpenAction("act_2", "creative_pause", "ready", "x" * 64, frozenset({"campaign:fast"}))
    blocked = gen.evaluate_budget_shift(world(), context(WORLD, THROUGH, open_actions=[other]), "slow", "fast")
    assert blocked is not None
    assert checks(blocked)["no_conflicting_action"] == {
        "check": "no_conflicting_action",
        "passed": False,
        "detail": "open action act_2 touches the same campaign or creative",
    }


def test_a_rejection_suppresses_until_the_window_ends_or_the_sample_doubles() -> None:
    base = gen.propose(world(), context(WORLD, THROUGH))
    shift = next(e for e in base if e.action_type == "budget_shift")
    ctx = context(WORLD, THROUGH)
    recent = gen.Rejection(shift.fingerprint, ctx.as_of - timedelta(days=3), sample=shift.sample)
    assert "budget_shift" not in by_type(gen.propose(world(), context(WORLD, THROUGH, rejections=[recent])))
    old = gen.Rejection(shift.fingerprint, ctx.as_of - timedelta(days=15), sample=shift.sample)
    assert "budget_shift" in by_type(gen.propose(world(), context(WORLD, THROUGH, rejections=[old])))
    small = gen.Rejection(shift.fingerprint, ctx.as_of - timedelta(days=3), sample=shift.sample // 2)
    assert shift.confidence >= 0.99
    assert "budget_shift" in by_type(gen.propose(world(), context(WORLD, THROUGH, rejections=[small])))


def test_cooldown_and_stale_data_fail_their_checks_and_keep_the_action_a_draft() -> None:
    ctx = context(WORLD, THROUGH, cooldowns={"campaign:fast": datetime_at(THROUGH)})
    stale = dataclasses.replace(ctx, as_of=ctx.as_of + timedelta(days=5))
    shift = gen.evaluate_budget_shift(world(), stale, "slow", "fast")
    assert shift is not None and not shift.guardrails_pass
    c = checks(shift)
    assert c["cooldown_elapsed"] == {
        "check": "cooldown_elapsed",
        "passed": False,
        "detail": "a FloKit action on fast ended 2026-11-20; cooldown 7 days",
    }
    assert c["data_fresh"]["detail"] == "newest data is of 2026-11-20, 5 day(s) before 2026-11-25 (limit 2)"
    assert c["data_fresh"]["passed"] is False


def datetime_at(day: date):
    from datetime import UTC, datetime

    return datetime.combine(day, datetime.min.time(), tzinfo=UTC)


def offer_rows(us_rate: float, else_rate: float, users: int = 20, via_trial: float = 0.0) -> pl.DataFrame:
    """Signal rows of two offers in three countries; `via_trial` of the new subscriptions are trial
    conversions (counted in `subscriptions` too, as the signals asset counts them)."""
    rows = []
    for back in range(10, 40):
        for country, rate_a in (("US", us_rate), ("DE", else_rate), ("FR", else_rate)):
            for offer, rate in (("weekly", rate_a), ("monthly", else_rate)):
                row = {c: None for c in signal_rows("ws_test", THROUGH, [FAST], days=1).columns}
                row.update(
                    workspace_id="ws_test", cohort_date=THROUGH - timedelta(days=back), campaign="organic",
                    creative="(none)", country=country, offer=offer, paywall="onboarding", installs=users,
                    spend=0.0, paywall_users=users, trials=0,
                    trial_conversions=round(round(users * rate) * via_trial),
                    subscriptions=round(users * rate), refunds_n=0, complete_days=min(back, 30),
                )  # fmt: skip
                for h in (7, 14, 30):
                    row[f"net_rev_d{h}"] = row[f"net_rev_sq_d{h}"] = 0.0
                rows.append(row)
    return pl.DataFrame(rows, schema=signal_rows("ws_test", THROUGH, [FAST], days=1).schema)


def test_an_offer_that_converts_far_better_in_one_country_is_proposed_as_a_test_design() -> None:
    found = gen.propose(offer_rows(0.5, 0.2), context((), THROUGH))
    assert by_type(found) == {
        "offer_test": [
            {"paywall_id": "onboarding", "country": "US", "control_offer": "monthly", "treatment_offer": "weekly"}
        ]
    }
    test = found[0]
    assert test.rollback_rules == () and test.evidence["design"]["split"] == [0.5, 0.5]
    assert checks(test)["spend_change_within_limit"]["detail"] == "an offer test changes no ad spend"
    assert gen.propose(offer_rows(0.2, 0.2), context((), THROUGH)) == []


def test_an_offer_tests_paid_conversion_counts_each_new_subscription_once() -> None:
    # Half the new subscriptions came through a trial: they are in `subscriptions` already.
    [test] = gen.propose(offer_rows(0.5, 0.2, via_trial=0.5), context((), THROUGH))
    signals = {s["label"]: s["value"] for s in test.content.data_signals}
    assert signals["Paid conversion, weekly in US"] == "50.0 %"
    assert signals["Paid conversion, weekly elsewhere"] == "20.0 %"
    assert test.evidence["here"] == {"users": 600, "paid": 300}


def test_evidence_is_json_safe() -> None:
    for e in gen.candidates(world(), context(WORLD, THROUGH)):
        text = repr(e.evidence)
        assert "nan" not in text and "inf" not in text
        assert all(not (isinstance(v, float) and not math.isfinite(v)) for v in e.evidence.values())


def test_a_campaign_unknown_to_the_registry_is_not_compared() -> None:
    extra = Campaign("ghost", 40, 1.0, 0.2, 20.0, budget=50.0)
    ctx = context(WORLD, THROUGH)  # ghost is in the signals, not in the registry
    assert gen.evaluate_budget_shift(world((*WORLD, extra)), ctx, "slow", "ghost") is None
