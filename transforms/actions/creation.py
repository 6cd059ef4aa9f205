"""`POST /v1/actions` with parameters, decided: what a client's own subject becomes once the
engine's function for its type has evaluated it (`proposals.evaluate`), pure, so the route only
reads, calls and writes.

The evaluation's content, rollback rules and guardrail checks are the engine's, and its evidence
is kept as a `create` evaluation; when the data cannot speak about the subject at all (no signals
yet, no registry budget for a campaign, no such ad), the action is a draft whose one check says
so. A budget shift in another currency than the campaigns' budgets is refused: the engine sizes
in the registry's currency, so a client's amount in another one cannot be checked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from transforms.actions import NOT_ESTIMATED, TYPE_LABELS, ActionContent, ActionType
from transforms.actions.evidence import Evaluation, confidence_line, evaluation_detail
from transforms.actions.rules import RollbackRule


@dataclass(frozen=True)
class Creation:
    """What the new action and its `create` evaluation hold."""

    content: ActionContent
    fingerprint: str | None
    rollback_rules: tuple[RollbackRule, ...]
    detail: dict[str, Any]

    @property
    def outcome(self) -> str:
        return "passed" if self.content.guardrails_pass else "failed"


def currency_refusal(evaluation: Evaluation | None, action_type: str, parameters: dict[str, Any]) -> str | None:
    """The 400 message when a budget shift's currency is not the campaigns' budgets' one, or None."""
    if evaluation is None or action_type != "budget_shift":
        return None
    theirs = evaluation.parameters["currency"]
    if theirs == parameters["currency"]:
        return None
    return f"parameters.currency: the campaigns' budgets are in {theirs}, not {parameters['currency']}"


def creation(
    evaluation: Evaluation | None, action_type: ActionType, *, proposed_by: str, reason: str | None
) -> Creation:
    """The action a client's subject becomes (module docstring)."""
    if evaluation is not None:
        detail = evaluation_detail(evaluation, "Evaluation at creation: " + confidence_line(evaluation))
        return Creation(evaluation.content, evaluation.fingerprint, evaluation.rollback_rules, detail)
    label = TYPE_LABELS[action_type]
    content = ActionContent(
        title=f"{label} proposed by {proposed_by}",
        rationale=reason or f"{label} proposed by {proposed_by}.",
        expected_impact=dict(NOT_ESTIMATED),
        guardrail_checks=[
            {
                "check": "minimum_cohort_size",
                "passed": False,
                "detail": (
                    "the workspace's action signals and ad-account registry hold no data this subject "
                    "can be evaluated on (no signals yet, no known budget, or no such active ad)"
                ),
            }
        ],
    )
    return Creation(content, None, (), {"summary": "Evaluation at creation: no data for this subject"})
