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


# An offer test's experiment decides it when the treatment's chance to beat the control on the
# primary metric is past either bound (docs/metrics.md "Experiment results": the A/A harness
# declares at 0.95 in 5 % of A/A experiments, its nominal rate).
DECIDE_WIN = 0.95
DECIDE_LOSS = 0.05


@dataclass(frozen=True)
class TestReading:
    """What an offer test's experiment results say (`read_experiment`), as one monitor evaluation."""

    outcome: Literal["pending", "inconclusive", "ok", "breach"]  # ok: the treatment won; breach: stop it
    summary: str  # the evaluation's line in the action's history
    publish: Literal["winner", "control"] | None  # what ending the test publishes; None: it keeps running
    figures: dict[str, Any]


def read_experiment(results: Mapping[str, Any] | None, srm_flagged: bool) -> TestReading:
    """The stored results of an offer test's experiment (`GET /v1/experiments/{id}`'s `results`):
    a sample ratio mismatch stops the test with the control published back (its figures cannot be
    trusted); a treatment whose chance to beat the control reaches `DECIDE_WIN` is published, one
    that falls to `DECIDE_LOSS` ends the test with the control; otherwise it runs on (until its
    observation window ends). Figures not yet mature (revenue per user at D14 before anyone has
    had 14 days) decide nothing."""
    if results is None or len(results.get("variants") or []) < 2:
        return TestReading("pending", "Experiment results: not computed yet (the next refresh)", None, {})
    control, treatment = results["variants"][0], results["variants"][1]
    srm = results.get("srm") or {}
    chance = treatment.get("chance_to_beat_control")
    figures = {
        "exposed_users": [control.get("exposed_users"), treatment.get("exposed_users")],
        "primary_metric_value": [control.get("primary_metric_value"), treatment.get("primary_metric_value")],
        "chance_to_beat_control": chance,
        "lift_vs_control": treatment.get("lift_vs_control"),
        "srm_p_value": srm.get("p_value"),
        "as_of": results.get("as_of"),
    }
    users = f"{_count(control.get('exposed_users'))} and {_count(treatment.get('exposed_users'))} users"
    if srm_flagged or srm.get("flagged"):
        return TestReading("breach", f"Experiment results: sample ratio mismatch (p = {_num(srm.get('p_value'))}) "
                           f"over {users}; the split is not what was set, so the figures are not trusted",
                           "control", figures)  # fmt: skip
    if not isinstance(chance, int | float) or not math.isfinite(chance):
        return TestReading("pending", f"Experiment results: {users}, the primary metric is not mature yet", None,
                           figures)  # fmt: skip
    said = f"Experiment results: chance the treatment beats the control {chance:.1%} over {users}"
    if chance >= DECIDE_WIN:
        return TestReading("ok", f"{said}: the treatment won", "winner", figures)
    if chance <= DECIDE_LOSS:
        return TestReading("breach", f"{said}: the control won", "control", figures)
    return TestReading("inconclusive", said, None, figures)


def _count(value: object) -> str:
    return f"{value:,}" if isinstance(value, int) else "n/a"


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


def decide_offer_test(
    breaches: Sequence[tuple[RollbackRule, Mapping[str, Any]]],
    policy: Policy,
    window_over: bool,
    reading: TestReading | None,
) -> tuple[Decision, Literal["winner", "control"] | None]:
    """An offer test's decision and what ending it publishes: a guardrail that stops it publishes
    the control back; else a decisive reading of its experiment ends it as the reading says; else
    the end of its observation window ends it with the control (the operator may still ship the
    treatment from the experiment)."""
    stopped = decide(breaches, policy, "offer_test", window_over=False)
    if stopped.trigger is not None:
        return stopped, "control"
    if reading is not None and reading.publish is not None:
        return Decision("complete", reading.summary), reading.publish
    ended = decide(breaches, policy, "offer_test", window_over)
    return ended, "control" if ended.trigger is not None else None


def read_experiments(readings: Sequence[TestReading]) -> TestReading:
    """An offer test over several apps runs one experiment per app: one that must stop (a sample
    ratio mismatch, a lost test) stops the test with the control; the treatment is published only
    when it won in every app; otherwise the test runs on."""
    if len(readings) == 1:
        return readings[0]
    summary = "; ".join(r.summary for r in readings)
    figures = {"experiments": [r.figures for r in readings]}
    stopping = [r for r in readings if r.outcome == "breach"]
    if stopping:
        return TestReading("breach", summary, "control", figures)
    if readings and all(r.outcome == "ok" for r in readings):
        return TestReading("ok", summary, "winner", figures)
    pending = not readings or all(r.outcome == "pending" for r in readings)
    return TestReading("pending" if pending else "inconclusive", summary, None, figures)
