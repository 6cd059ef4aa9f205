"""The executor's write rules, pure: a leg is written only over the value FloKit expects there."""

from __future__ import annotations

from transforms.actions import steps
from transforms.actions.execution import Leg
from transforms.actions.steps import (
    compensation_step,
    leg_step,
    offer_finish_step,
    offer_test_step,
    preflight_refusal,
)

LEG = Leg(1, "acct", "meta", "campaign", "123", None, "daily_budget", 50000, 46000, "USD", "meta_broad")


def test_an_apply_writes_over_the_value_read_skips_its_own_target_and_stops_on_anything_else() -> None:
    assert leg_step(50000, before=50000, after=46000) == "apply"
    assert leg_step(46000, before=50000, after=46000) == "skip"  # a re-run after the write landed
    assert leg_step(47000, before=50000, after=46000) == "conflict"  # an operator's value
    assert leg_step("paused", before="active", after="paused") == "skip"


def test_a_revert_writes_back_only_over_flokits_value() -> None:
    # The revert of 50000 → 46000: `before` is what FloKit set, `after` what it restores.
    assert leg_step(46000, before=46000, after=50000) == "apply"
    assert leg_step(50000, before=46000, after=50000) == "skip"
    assert leg_step(45000, before=46000, after=50000) == "conflict"


def test_compensation_only_undoes_a_value_still_flokits() -> None:
    assert compensation_step(46000, applied_after=46000) == "apply"
    assert compensation_step(50000, applied_after=46000) == "conflict"


def test_the_preflight_refuses_a_live_value_other_than_the_registrys_and_says_which() -> None:
    assert preflight_refusal(LEG, 50000) is None
    reason = preflight_refusal(LEG, 51000)
    assert reason is not None and reason.startswith("meta_broad: the live daily_budget on meta is 51000, not the 50000")


def test_an_offer_test_publishes_only_over_the_version_it_was_planned_on() -> None:
    assert offer_test_step(3, "ana@acme.com", before_version=3, after_version=4, executor="flokit executor") == "apply"
    assert offer_test_step(4, "flokit executor", 3, 4, "flokit executor") == "skip"  # its own, a re-run
    assert offer_test_step(4, "ana@acme.com", 3, 4, "flokit executor") == "conflict"  # an operator's v4
    assert offer_test_step(5, "flokit executor", 3, 4, "flokit executor") == "conflict"
    assert offer_finish_step(4, test_version=4) == "apply"
    assert offer_finish_step(5, test_version=4) == "conflict"
    assert offer_finish_step(None, test_version=4) == "conflict"


def test_only_an_approved_action_is_applied_and_only_a_rolled_back_one_reverted() -> None:
    assert steps.not_runnable("apply", "approved") is None
    assert steps.not_runnable("revert", "rolled_back") is None
    assert steps.not_runnable("apply", "running") == "the action is running, not approved"
    assert steps.not_runnable("revert", "completed") == "the action is completed, not rolled_back"


def test_a_write_counts_only_when_the_platform_reads_back_what_was_sent() -> None:
    assert steps.written(5000, 5000)
    assert not steps.written(4999, 5000)  # a platform that clamps or rounds the budget
    assert not steps.written("PAUSED", "ACTIVE")


def test_a_revert_with_a_failed_leg_is_incomplete_even_beside_a_conflict() -> None:
    assert steps.revert_result([], []) == "reverted"
    assert steps.revert_result([], [2]) == "conflict"
    assert steps.revert_result([1], [2]) == "incomplete"
