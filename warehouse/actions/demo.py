"""The demo queue `flokit up` puts in the workspace it bootstraps.

Each action is created and moved through the real transitions (with their audit rows), so the
demo shows what a real queue looks like: a newcomer's first `GET /v1/actions` lists actions in
every status, each with a history that explains how it got there.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.engine import Connection

from transforms.actions import ActionType, generate_content
from warehouse.actions.repository import Action, create_action, transition
from warehouse.db import utcnow

DEMO_ACTOR = "flokit demo"
GROWTH_LEAD = "maya@demo.flokit.dev"
EXECUTOR = "flokit executor"

# (type, hours ago it was created, the triggers that brought it to its status, whether its
# guardrails pass): one line per action of the demo queue.
_QUEUE: tuple[tuple[ActionType, int, tuple[str, ...], bool], ...] = (
    ("budget_shift", 2, (), True),  # ready
    ("creative_pause", 5, (), True),  # ready
    ("offer_test", 9, (), False),  # draft: cohort too small so far
    ("budget_shift", 26, ("approve",), True),  # approved, waiting for the executor
    ("creative_pause", 50, ("approve", "start"), True),  # running
    ("budget_shift", 120, ("approve", "start", "complete"), True),  # completed
    ("offer_test", 74, ("reject",), True),  # rejected
    ("creative_pause", 170, ("approve", "start", "rollback"), True),  # rolled back
)

_NOTES = {
    "approve": (GROWTH_LEAD, "Looks right; guardrails pass."),
    "start": (EXECUTOR, "Applied on the ad platform."),
    "complete": (EXECUTOR, "Observation window over."),
    "reject": (GROWTH_LEAD, "Pricing change freeze until the next release."),
    "rollback": (GROWTH_LEAD, "Installs dropped more than 25% in 3 days."),
}


def seed_demo_actions(conn: Connection, *, workspace_id: str, now: datetime | None = None) -> list[Action]:
    """Create the demo queue in `workspace_id` (caller's write transaction); returns the actions."""
    now = now or utcnow()
    created = []
    for i, (action_type, hours_ago, triggers, passes) in enumerate(_QUEUE):
        at = now - timedelta(hours=hours_ago)
        content = generate_content(action_type, seed=f"demo-{i}", guardrails_pass=passes)
        action = create_action(
            conn,
            workspace_id=workspace_id,
            action_type=action_type,
            content=content,
            actor=DEMO_ACTOR,
            origin="demo",
            at=at,
        )
        for step, trigger in enumerate(triggers, start=1):
            actor, note = _NOTES[trigger]
            action = transition(
                conn,
                workspace_id=workspace_id,
                action_id=action.id,
                trigger=trigger,
                actor=actor,
                note=note,
                at=at + timedelta(hours=3 * step),
            )
        created.append(action)
    return created
