"""Growth actions: the pure state machine and the content of an action (title, signals, guardrails).

Decided in ARCHITECTURE.md ("Decisions"): three types, seven statuses, which trigger moves which
status, which types can be rolled back. Everything here is data and pure functions so that the
repository (one `UPDATE ... WHERE status IN (...)` per transition) and the API read the same rules.
"""

from __future__ import annotations

import random
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


_CAMPAIGNS = ("meta_us_broad", "tiktok_uk_lookalike", "google_uac_de", "meta_fr_retarget", "apple_search_us_brand")
_CREATIVES = ("ugc_testimonial_v3", "before_after_carousel", "founder_story_15s", "price_anchor_static")
_OFFERS = ("annual_7d_trial", "monthly_no_trial", "annual_intro_40pct", "weekly_3d_trial")
# Guardrail thresholds: below these cohorts are too small or signals too noisy to act on.
MIN_COHORT_SIZE = 500
MIN_CONFIDENCE = 0.9
# A budget shift may move at most this share of a campaign's daily spend at once.
MAX_SPEND_CHANGE = 0.30


def generate_content(
    action_type: ActionType, *, seed: str, reason: str | None = None, guardrails_pass: bool = True
) -> ActionContent:
    """Realistic, deterministic content for an action (the same seed gives the same action).

    `guardrails_pass=False` produces a draft whose first failing check says why it waits.
    """
    rng = random.Random(seed)  # noqa: S311  (demo-quality content, not secrets)
    cohort = rng.randint(MIN_COHORT_SIZE + 100, 12_000) if guardrails_pass else rng.randint(80, MIN_COHORT_SIZE - 1)
    confidence = round(rng.uniform(MIN_CONFIDENCE, 0.99), 2)
    checks = [
        {
            "check": "minimum_cohort_size",
            "passed": cohort >= MIN_COHORT_SIZE,
            "detail": f"{cohort} users in the cohort (minimum {MIN_COHORT_SIZE})",
        },
        {
            "check": "statistical_confidence",
            "passed": confidence >= MIN_CONFIDENCE,
            "detail": f"{confidence:.0%} confidence (minimum {MIN_CONFIDENCE:.0%})",
        },
    ]
    if action_type == "budget_shift":
        source, target = rng.sample(_CAMPAIGNS, 2)
        share = round(rng.uniform(0.1, MAX_SPEND_CHANGE), 2)
        amount = rng.randrange(200, 3000, 50)
        payback_src, payback_dst = rng.randint(75, 140), rng.randint(28, 60)
        checks.append(
            {
                "check": "spend_change_within_limit",
                "passed": share <= MAX_SPEND_CHANGE,
                "detail": f"moves {share:.0%} of daily spend (limit {MAX_SPEND_CHANGE:.0%})",
            }
        )
        return ActionContent(
            title=f"Shift ${amount}/day from {source} to {target}",
            rationale=reason
            or f"{target} pays back in {payback_dst} days against {payback_src} for {source} at similar volume.",
            expected_impact={"metric": "payback_days", "direction": "decrease", "magnitude": float(rng.randint(5, 25))},
            data_signals=[
                {"label": f"Payback days, {source}", "value": str(payback_src)},
                {"label": f"Payback days, {target}", "value": str(payback_dst)},
                {"label": f"ROAS 30d, {target}", "value": f"{rng.uniform(0.4, 1.1):.2f}"},
                {"label": "Cohort size", "value": str(cohort)},
            ],
            guardrail_checks=checks,
            rollback_conditions=[
                f"ROAS 30d of {target} falls below {rng.uniform(0.3, 0.5):.2f} within 7 days",
                f"CAC of {target} rises more than 20% above its 14-day average",
            ],
        )
    if action_type == "creative_pause":
        creative, campaign = rng.choice(_CREATIVES), rng.choice(_CAMPAIGNS)
        ctr, conv = rng.uniform(0.3, 0.9), rng.uniform(0.01, 0.04)
        return ActionContent(
            title=f"Pause creative {creative} in {campaign}",
            rationale=reason
            or f"{creative} converts trials at {conv:.1%}, under half the campaign average, while taking 30% of spend.",
            expected_impact={"metric": "cac", "direction": "decrease", "magnitude": round(rng.uniform(0.05, 0.2), 2)},
            data_signals=[
                {"label": f"CTR, {creative}", "value": f"{ctr:.2f}%"},
                {"label": f"Trial conversion, {creative}", "value": f"{conv:.1%}"},
                {"label": f"Spend share in {campaign}", "value": f"{rng.uniform(0.2, 0.4):.0%}"},
                {"label": "Cohort size", "value": str(cohort)},
            ],
            guardrail_checks=checks,
            rollback_conditions=[
                f"Installs of {campaign} drop more than 25% within 3 days",
                "Trial starts fall below the 7-day average for 2 consecutive days",
            ],
        )
    control, variant = rng.sample(_OFFERS, 2)
    return ActionContent(
        title=f"Test offer {variant} against {control}",
        rationale=reason
        or f"Users on {control} churn at the first renewal; {variant} retained better in a comparable cohort.",
        expected_impact={
            "metric": "trial_conversion_rate",
            "direction": "increase",
            "magnitude": round(rng.uniform(0.02, 0.08), 3),
        },
        data_signals=[
            {"label": f"Trial conversion, {control}", "value": f"{rng.uniform(0.25, 0.4):.1%}"},
            {"label": f"Week-4 retention, {control}", "value": f"{rng.uniform(0.3, 0.5):.0%}"},
            {"label": "Cohort size", "value": str(cohort)},
        ],
        guardrail_checks=checks,
        rollback_conditions=["Offer tests run to the end of their window; they are stopped, not rolled back"],
    )
