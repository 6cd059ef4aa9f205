"""Growth actions: the pure state machine and the content of an action (title, signals, guardrails).

Decided in ARCHITECTURE.md ("Decisions"): three types, seven statuses, which trigger moves which
status, which types can be rolled back. Everything here is data and pure functions so that the
repository (one `UPDATE ... WHERE status IN (...)` per transition) and the API read the same rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

ActionType = Literal["budget_shift", "creative_pause", "offer_test"]
ACTION_TYPES: tuple[ActionType, ...] = ("budget_shift", "creative_pause", "offer_test")
# The create request's verb forms (spec: "shift_budget, pause_creative, prepare_offer_test").
TYPE_ALIASES: dict[str, ActionType] = {
    "shift_budget": "budget_shift",
    "pause_creative": "creative_pause",
    "prepare_offer_test": "offer_test",
}
ACCEPTED_TYPE_NAMES: tuple[str, ...] = ACTION_TYPES + tuple(TYPE_ALIASES)
# A budget shift and a creative pause undo cleanly on the ad platform; an offer test has
# already shown prices to users, so "rolling it back" would not undo anything.
ROLLBACK_TYPES: frozenset[str] = frozenset({"budget_shift", "creative_pause"})

Status = Literal["draft", "ready", "approved", "running", "completed", "rejected", "rolled_back"]
STATUSES: tuple[Status, ...] = ("draft", "ready", "approved", "running", "completed", "rejected", "rolled_back")
# The statuses of an open action: at most one open action per fingerprint (a partial unique
# index over these), and the engine re-evaluates an open action instead of proposing it again.
OPEN_STATUSES: tuple[Status, ...] = ("draft", "ready", "approved", "running")
# Who made an action: the engine from the workspace's data, a client over the API (its own
# proposal, nothing evaluated), or the demo seed.
Origin = Literal["engine", "api", "demo"]
ORIGINS: tuple[Origin, ...] = ("engine", "api", "demo")
# `action_evaluations`: every decision about an action that is not a transition.
EvaluationKind = Literal["proposal", "revalidation", "create", "preflight", "monitor"]
EVALUATION_KINDS: tuple[EvaluationKind, ...] = ("proposal", "revalidation", "create", "preflight", "monitor")
EvaluationOutcome = Literal[
    "proposed", "passed", "failed", "faded", "pending", "inconclusive", "ok", "breach", "refused"
]
EVALUATION_OUTCOMES: tuple[EvaluationOutcome, ...] = (
    "proposed", "passed", "failed", "faded", "pending", "inconclusive", "ok", "breach", "refused",
)  # fmt: skip
# `action_executions`: the ledger of platform writes (docs/actions-engine.md, "Tables").
EXECUTION_KINDS: tuple[str, ...] = ("apply", "revert")
EXECUTION_STATES: tuple[str, ...] = ("intent", "sent", "verified", "failed", "conflict", "compensated")
EXECUTION_FIELDS: tuple[str, ...] = ("daily_budget", "status", "paywall_config")
# What POST /v1/actions answers for a created action, stored as `ready` (spec: "ready_for_approval").
CREATED_STATUS_LABEL = "ready_for_approval"
# The status of that answer: the label, or `draft` when the guardrails did not pass.
CreatedStatus = Literal["ready_for_approval", "draft"]

Trigger = Literal[
    "create", "guardrails_passed", "approve", "reject", "start", "complete", "rollback", "expire", "abandon"
]


@dataclass(frozen=True)
class Transition:
    sources: frozenset[str]
    target: Status
    webhook_event: str | None = None


TRANSITIONS: dict[str, Transition] = {
    "guardrails_passed": Transition(frozenset({"draft"}), "ready"),
    "approve": Transition(frozenset({"ready"}), "approved", "action.approved"),
    "reject": Transition(frozenset({"draft", "ready"}), "rejected"),
    "start": Transition(frozenset({"approved"}), "running"),
    "complete": Transition(frozenset({"running"}), "completed"),
    "rollback": Transition(frozenset({"running", "completed"}), "rolled_back", "action.rolled_back"),
    # The second wave's transitions (ARCHITECTURE "Decisions for the second wave"): the engine
    # rejects a proposal whose signal faded (actor `flokit engine`), and the executor rejects an
    # approved action whose preflight failed or that it gave up on (actor `flokit executor`). Each
    # has its own trigger so the history tells a human's "no" from the machine's.
    "expire": Transition(frozenset({"draft", "ready"}), "rejected"),
    "abandon": Transition(frozenset({"approved"}), "rejected"),
}
# The triggers that end in `rejected`: each sets `rejected_at` / `rejected_by`.
REJECTING_TRIGGERS: frozenset[str] = frozenset({"reject", "expire", "abandon"})
CREATED_WEBHOOK_EVENT = "action.created"


def canonical_type(name: str) -> ActionType:
    """The stored type for a type name or its verb alias; ValueError for anything else."""
    if name in ACTION_TYPES:
        return name
    if name in TYPE_ALIASES:
        return TYPE_ALIASES[name]
    raise ValueError(f"unknown action type {name!r}; expected one of {', '.join(ACCEPTED_TYPE_NAMES)}")


def allowed_sources(trigger: str, action_type: str) -> frozenset[str]:
    """The statuses from which `trigger` may fire for an action of `action_type` (empty: never)."""
    transition = TRANSITIONS[trigger]
    if trigger == "rollback" and action_type not in ROLLBACK_TYPES:
        return frozenset()
    return transition.sources


def refusal(trigger: str, action_type: str, status: str) -> str:
    """Why `trigger` cannot fire now: the 409 message a client reads."""
    if trigger == "rollback" and action_type not in ROLLBACK_TYPES:
        return f"Actions of type {action_type} cannot be rolled back (only {', '.join(sorted(ROLLBACK_TYPES))})"
    sources = " or ".join(sorted(TRANSITIONS[trigger].sources))
    return f"Cannot {trigger} an action in status {status}; it must be {sources}"


# --- Content: what a recommended action says -------------------------------------------------


@dataclass(frozen=True)
class ActionContent:
    title: str
    rationale: str
    expected_impact: dict[str, Any]
    data_signals: list[dict[str, str]] = field(default_factory=list)
    guardrail_checks: list[dict[str, Any]] = field(default_factory=list)
    rollback_conditions: list[str] = field(default_factory=list)

    @property
    def guardrails_pass(self) -> bool:
        return all(check["passed"] for check in self.guardrail_checks)


TYPE_LABELS: dict[str, str] = {
    "budget_shift": "Budget shift",
    "creative_pause": "Creative pause",
    "offer_test": "Offer test",
}
# A client's own action carries no estimate; the spec's `expected_impact` object still has to be
# there, so it says so in its own fields instead of carrying a number FloKit did not compute.
NOT_ESTIMATED: dict[str, Any] = {"metric": "not_estimated", "direction": "not_estimated", "magnitude": 0.0}


def client_content(action_type: ActionType, *, proposed_by: str, reason: str | None) -> ActionContent:
    """The content of an action a client creates without parameters: its own proposal.

    FloKit evaluated nothing for it, so it carries no data signals, no guardrail checks and no
    rollback conditions (docs/actions-engine.md, "Decisions"); the title and rationale say who
    proposed it, and the rationale is the client's reason when it gave one.
    """
    label = TYPE_LABELS[action_type]
    return ActionContent(
        title=f"{label} proposed by {proposed_by}",
        rationale=reason
        or (
            f"{label} proposed by {proposed_by} without a reason. FloKit evaluated nothing for it: "
            "no data signals, guardrail checks or rollback conditions were computed."
        ),
        expected_impact=dict(NOT_ESTIMATED),
    )


# What an evaluation of each kind decided, for a person reading the history.
_EVALUATION_KIND_TEXT = {
    "proposal": "Engine proposal",
    "revalidation": "Engine re-evaluation",
    "create": "Evaluation at creation",
    "preflight": "Executor preflight",
    "monitor": "Monitor check",
}


def evaluation_summary(kind: str, outcome: str, detail: dict[str, Any]) -> str:
    """One line for an evaluation in the action's history: the producer's own `summary` in
    `detail` when it wrote one (it knows the numbers), else the kind and the outcome."""
    written = detail.get("summary")
    if isinstance(written, str) and written.strip():
        return written.strip()
    return f"{_EVALUATION_KIND_TEXT.get(kind, kind)}: {outcome}"
