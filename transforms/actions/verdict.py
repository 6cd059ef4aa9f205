"""The monitor's decision for one running action, pure: roll it back, complete it, or let it run.

`orchestration/actions/monitor.py` evaluates the rules (`transforms.actions.monitoring`), records
them and carries out what `decide` answers; the rule itself lives here so a unit test checks it
without a database (design note §5.6, docs/actions-engine.md "The flow"):
- a breach of an `on_breach: rollback` rule under the workspace's `auto_rollback` policy rolls the
  action back (its first such rule names the reason); an offer test is `completed` instead, since a
  paywall test has no previous spend to restore;
- otherwise, with no rollback rule in breach, an action whose observation window is over is
  completed; a breach of an `alert` rule, or a rollback rule without `auto_rollback`, only alerts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from transforms.actions import ROLLBACK_TYPES
from transforms.actions.policy import Policy
from transforms.actions.rules import RollbackRule, render


@dataclass(frozen=True)
class Decision:
    trigger: Literal["rollback", "complete"] | None  # None: the action keeps running
    note: str | None = None  # the transition's note


def decide(
    breaches: Sequence[tuple[RollbackRule, Mapping[str, Any]]], policy: Policy, action_type: str, window_over: bool
) -> Decision:
    """`breaches`: this check's breached rules with their evaluation detail (observed, bound, ...)."""
    stopping = [(rule, detail) for rule, detail in breaches if rule.on_breach == "rollback"]
    if stopping and policy.auto_rollback:
        rule, detail = stopping[0]
        if action_type in ROLLBACK_TYPES:
            return Decision("rollback", breach_note(rule, detail))
        return Decision("complete", f"Stopped (an offer test is not rolled back): {breach_note(rule, detail)}")
    if not stopping and window_over:
        return Decision("complete", f"Observation window of {policy.observation_days} days ended with no breach")
    return Decision(None)


def announce(previous_outcome: str | None) -> bool:
    """A breach emits `guardrail.triggered` once per episode: when the rule's previous check was not
    a breach (with `auto_rollback` off, an action that stays in breach is not re-announced)."""
    return previous_outcome != "breach"


def publishes_control_back(transition: str | None, action_type: str) -> bool:
    """An offer test the monitor completes (stopped by a breach or at the window's end) gets its
    control published back on the gateway; the operator may publish the winner later."""
    return transition == "complete" and action_type == "offer_test"


def breach_note(rule: RollbackRule, detail: Mapping[str, Any]) -> str:
    """The rendered rule with the numbers that breached it (the transition note, the webhook detail)."""
    parts = [f"observed {_num(detail.get('observed'))}"]
    if detail.get("bound") is not None:
        parts.append(f"bound {_num(detail.get('bound'))}")
    parts.append(f"threshold {_num(detail.get('threshold'))}")
    if detail.get("baseline") is not None:
        parts.append(f"baseline {_num(detail.get('baseline'))}")
    return f"{render(rule)}: {', '.join(parts)}"


def _num(value: object) -> str:
    if not isinstance(value, int | float) or not math.isfinite(value):
        return "n/a"
    return f"{value:.4g}"
