"""Actions built literally for the state-machine, API and webhook tests.

The engine's content is computed from data (`transforms.actions.proposals`); these tests are about
transitions, tenancy, paging and payloads, so they write the content out literally instead: every
string below is visibly a test fixture, never something FloKit computed.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.engine import Connection

from transforms.actions import ActionContent
from warehouse.actions.repository import Action, create_action, transition
from warehouse.db import utcnow


def literal_content(action_type: str, *, guardrails_pass: bool = True, reason: str | None = None) -> ActionContent:
    """A fixed content for `action_type`; with `guardrails_pass=False` its cohort check fails."""
    return ActionContent(
        title=f"Test {action_type}",
        rationale=reason or f"Literal test content for a {action_type}.",
        expected_impact={"metric": "test_metric", "direction": "increase", "magnitude": 0.1},
        data_signals=[{"label": "Test signal", "value": "1"}],
        guardrail_checks=[
            {"check": "minimum_cohort_size", "passed": guardrails_pass, "detail": "test cohort"},
            {"check": "statistical_confidence", "passed": True, "detail": "test confidence"},
        ],
        rollback_conditions=["Test condition"],
    )


# (type, hours ago, triggers, guardrails pass): one action in every status.
QUEUE: tuple[tuple[str, int, tuple[str, ...], bool], ...] = (
    ("budget_shift", 2, (), True),  # ready
    ("creative_pause", 5, (), True),  # ready
    ("offer_test", 9, (), False),  # draft
    ("budget_shift", 26, ("approve",), True),  # approved
    ("creative_pause", 50, ("approve", "start"), True),  # running
    ("budget_shift", 120, ("approve", "start", "complete"), True),  # completed
    ("offer_test", 74, ("reject",), True),  # rejected
    ("creative_pause", 170, ("approve", "start", "rollback"), True),  # rolled back
)


def seed_queue(conn: Connection, *, workspace_id: str, now: datetime | None = None) -> list[Action]:
    """Eight actions, one per line of QUEUE, moved through the real transitions."""
    now = now or utcnow()
    created = []
    for action_type, hours_ago, triggers, passes in QUEUE:
        at = now - timedelta(hours=hours_ago)
        action = create_action(
            conn,
            workspace_id=workspace_id,
            action_type=action_type,
            content=literal_content(action_type, guardrails_pass=passes),
            actor="test",
            origin="api",
            at=at,
        )
        for step, trigger in enumerate(triggers, start=1):
            action = transition(
                conn,
                workspace_id=workspace_id,
                action_id=action.id,
                trigger=trigger,
                actor="tester@example.com",
                note=f"test {trigger}",
                at=at + timedelta(hours=3 * step),
            )
        created.append(action)
    return created
