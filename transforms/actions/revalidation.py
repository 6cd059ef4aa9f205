"""The engine's verdict on an open draft or ready action it evaluates again after a refresh, pure
(design note §5.4 hysteresis; docs/actions-engine.md "The engine's rules"):
- the subject no longer evaluable (no data speaks about it): `inconclusive`, and after
  `STALE_HOURS` without evaluable data `faded` and expired;
- evaluable: `faded` when the confidence is under `FADE_BELOW`, expired only when the evaluation
  before was under it too (two in a row, so one noisy refresh does not end a proposal); else
  `passed` or `failed` on the guardrails, and a draft whose guardrails now all pass is promoted.
`orchestration/actions/engine.py` records the outcome and carries out the transition.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

# An open proposal whose confidence falls under this on two consecutive evaluations expires.
FADE_BELOW = 0.80
# An open proposal its data no longer speaks about expires after this long.
STALE_HOURS = 72


@dataclass(frozen=True)
class Revalidation:
    outcome: Literal["faded", "inconclusive", "passed", "failed"]  # the evaluation row's outcome
    trigger: Literal["expire", "guardrails_passed"] | None = None  # None: the action stays as it is
    note: str | None = None  # the transition's note


def without_data(as_of_data: datetime, last_data: datetime) -> Revalidation:
    """No evaluation possible; `last_data`: the last evaluation that had data (or the creation)."""
    if as_of_data - last_data > timedelta(hours=STALE_HOURS):
        return Revalidation("faded", "expire", f"signal faded: no evaluable data for more than {STALE_HOURS} h")
    return Revalidation("inconclusive")


def with_data(confidence: float, guardrails_pass: bool, status: str, before: object) -> Revalidation:
    """An evaluation with data; `before`: the previous evaluation's confidence (None if it had none)."""
    faded = confidence < FADE_BELOW
    outcome: Literal["faded", "passed", "failed"] = "faded" if faded else ("passed" if guardrails_pass else "failed")
    if faded and isinstance(before, float | int) and before < FADE_BELOW:
        note = (
            f"signal faded: confidence {before * 100:.1f} % then {confidence * 100:.1f} %, "
            f"under {FADE_BELOW * 100:.0f} % on two consecutive evaluations"
        )
        return Revalidation(outcome, "expire", note)
    if status == "draft" and guardrails_pass:
        return Revalidation(outcome, "guardrails_passed", "every guardrail check passes on the latest data")
    return Revalidation(outcome)
