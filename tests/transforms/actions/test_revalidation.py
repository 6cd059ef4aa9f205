"""The engine's verdict on an open proposal it evaluates again: hysteresis, staleness, promotion."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from transforms.actions.revalidation import FADE_BELOW, STALE_HOURS, Revalidation, with_data, without_data

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def test_a_subject_without_data_waits_then_expires_after_the_stale_hours() -> None:
    assert without_data(T0 + timedelta(hours=STALE_HOURS), T0) == Revalidation("inconclusive")
    gone = without_data(T0 + timedelta(hours=STALE_HOURS, minutes=1), T0)
    assert (gone.outcome, gone.trigger) == ("faded", "expire")
    assert gone.note == f"signal faded: no evaluable data for more than {STALE_HOURS} h"


def test_a_fade_expires_only_on_the_second_evaluation_in_a_row_under_the_bar() -> None:
    assert with_data(0.70, True, "ready", before=0.95) == Revalidation("faded")
    assert with_data(0.70, True, "ready", before=None) == Revalidation("faded")
    gone = with_data(0.70, False, "ready", before=0.75)
    assert (gone.outcome, gone.trigger) == ("faded", "expire")
    assert gone.note == (
        f"signal faded: confidence 75.0 % then 70.0 %, under {FADE_BELOW * 100:.0f} % on two consecutive evaluations"
    )


def test_a_draft_whose_guardrails_now_pass_is_promoted_and_a_ready_one_kept() -> None:
    promoted = with_data(0.97, True, "draft", before=0.9)
    assert (promoted.outcome, promoted.trigger) == ("passed", "guardrails_passed")
    assert with_data(0.97, True, "ready", before=0.9) == Revalidation("passed")
    assert with_data(0.97, False, "draft", before=0.9) == Revalidation("failed")
    assert with_data(0.70, True, "draft", before=0.9).trigger == "guardrails_passed"  # faded once, guardrails pass
