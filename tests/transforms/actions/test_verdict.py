"""The monitor's decision: roll back, complete, or keep running, from the breaches and the policy."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from transforms.actions.policy import DEFAULT
from transforms.actions.proposals import shift_rollback_rules
from transforms.actions.verdict import announce, decide, decide_offer_test, read_experiment, read_experiments

CPI, _TRIAL, _ROAS, SPEND = shift_rollback_rules("meta_uac", 14, 7)
DETAIL = {"observed": 2.5, "bound": 2.1, "threshold": 1.9, "baseline": 1.5}
ON, OFF = replace(DEFAULT, auto_rollback=True), replace(DEFAULT, auto_rollback=False)


def test_a_rollback_rule_in_breach_rolls_back_under_auto_rollback_and_names_the_rule() -> None:
    decision = decide([(CPI, DETAIL)], ON, "budget_shift", window_over=False)
    assert decision.trigger == "rollback"
    assert decision.note is not None and decision.note.startswith("Roll back if CPI of campaign meta_uac rises")
    assert decision.note.endswith(": observed 2.5, bound 2.1, threshold 1.9, baseline 1.5")


def test_an_offer_test_in_breach_is_completed_not_rolled_back() -> None:
    decision = decide([(CPI, DETAIL)], ON, "offer_test", window_over=False)
    assert decision.trigger == "complete"
    assert decision.note is not None and decision.note.startswith("Stopped (an offer test is not rolled back): ")


def test_without_auto_rollback_or_with_only_an_alert_rule_a_breach_only_alerts() -> None:
    assert decide([(CPI, DETAIL)], OFF, "budget_shift", window_over=False).trigger is None
    assert decide([(SPEND, DETAIL)], ON, "budget_shift", window_over=False).trigger is None


def test_the_window_ends_in_completion_unless_a_rollback_rule_is_in_breach() -> None:
    done = decide([], ON, "budget_shift", window_over=True)
    assert (done.trigger, done.note) == (
        "complete",
        f"Observation window of {ON.observation_days} days ended with no breach",
    )
    assert decide([(SPEND, DETAIL)], ON, "budget_shift", window_over=True).trigger == "complete"
    assert decide([(CPI, DETAIL)], OFF, "budget_shift", window_over=True).trigger is None
    assert decide([], ON, "budget_shift", window_over=False).trigger is None


def test_a_breach_is_announced_once_per_episode() -> None:
    assert announce(None) and announce("ok") and announce("inconclusive")
    assert not announce("breach")


def results(chance: float | None, *, srm: bool = False, users: tuple[int, int] = (3000, 3000)) -> dict[str, Any]:
    """`GET /v1/experiments/{id}`'s results with the figures the reading uses."""
    return {
        "as_of": "2026-11-29T06:00:00Z",
        "srm": {"p_value": 0.0001 if srm else 0.4, "flagged": srm},
        "variants": [
            {"variant_id": "main", "exposed_users": users[0], "primary_metric_value": 1.2,
             "chance_to_beat_control": None},
            {"variant_id": "treatment_act_1", "exposed_users": users[1], "primary_metric_value": 1.5,
             "chance_to_beat_control": chance, "lift_vs_control": {"mean": 0.25, "ci_low": 0.1, "ci_high": 0.4}},
        ],
    }  # fmt: skip


def test_an_offer_tests_experiment_decides_it_past_either_bound_and_a_mismatch_stops_it() -> None:
    won = read_experiment(results(0.97), srm_flagged=False)
    assert (won.outcome, won.publish) == ("ok", "winner")
    assert won.summary == (
        "Experiment results: chance the treatment beats the control 97.0% over 3,000 and 3,000 users: the treatment won"
    )
    lost = read_experiment(results(0.03), srm_flagged=False)
    assert (lost.outcome, lost.publish) == ("breach", "control") and lost.summary.endswith("the control won")
    assert read_experiment(results(0.5), srm_flagged=False).outcome == "inconclusive"
    assert read_experiment(results(0.5), srm_flagged=False).publish is None
    mismatch = read_experiment(results(0.99, srm=True), srm_flagged=True)  # a winner on a broken split
    assert (mismatch.outcome, mismatch.publish) == ("breach", "control")
    assert "sample ratio mismatch (p = 0.0001)" in mismatch.summary
    assert read_experiment(None, srm_flagged=False).outcome == "pending"
    immature = read_experiment(results(None), srm_flagged=False)  # revenue per user at D14 before day 14
    assert (immature.outcome, immature.publish) == ("pending", None)


def test_across_apps_a_stop_anywhere_stops_and_the_treatment_ships_only_where_it_won_everywhere() -> None:
    won, open_, lost = (read_experiment(results(c), srm_flagged=False) for c in (0.97, 0.6, 0.02))
    assert read_experiments([won, won]).publish == "winner"
    assert read_experiments([won, open_]).publish is None
    assert read_experiments([won, lost]).publish == "control"


def test_an_offer_test_ends_with_the_control_on_a_guardrail_or_its_window_and_as_its_experiment_says() -> None:
    won = read_experiment(results(0.97), srm_flagged=False)
    stopped, publish = decide_offer_test([(CPI, DETAIL)], ON, window_over=False, reading=won)
    assert (stopped.trigger, publish) == ("complete", "control")  # a guardrail comes first
    decided, publish = decide_offer_test([], ON, window_over=False, reading=won)
    assert (decided.trigger, decided.note, publish) == ("complete", won.summary, "winner")
    open_ = read_experiment(results(0.6), srm_flagged=False)
    assert decide_offer_test([], ON, window_over=False, reading=open_) == (decide([], ON, "offer_test", False), None)
    ended, publish = decide_offer_test([], ON, window_over=True, reading=open_)
    assert (ended.trigger, publish) == ("complete", "control")
