"""The monitor's decision: roll back, complete, or keep running, from the breaches and the policy."""

from __future__ import annotations

from dataclasses import replace

from transforms.actions.policy import DEFAULT
from transforms.actions.proposals import shift_rollback_rules
from transforms.actions.verdict import announce, decide, publishes_control_back

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


def test_only_a_completed_offer_test_publishes_its_control_back() -> None:
    assert publishes_control_back("complete", "offer_test")
    assert not publishes_control_back("rollback", "offer_test")
    assert not publishes_control_back("complete", "budget_shift")
    assert not publishes_control_back(None, "offer_test")
