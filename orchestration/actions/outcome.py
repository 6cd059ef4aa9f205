"""What the executor's two halves share: its actor name, an `Outcome`, and the refusal that
abandons an approved action (the ad-platform legs in `executor`, the paywall gateway's offer
tests in `offer_gateway`)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from warehouse.actions import repository as repo
from warehouse.db import Database, utcnow
from warehouse.errors import TransitionRefused

EXECUTOR = "flokit executor"
ENGINE_VERSION = "executor-1"


@dataclass
class Outcome:
    action_id: str
    kind: str
    result: str  # running | rejected | nothing_to_apply | skipped | reverted | conflict | incomplete | finished
    message: str
    writes: int = 0
    conflicts: list[int] = field(default_factory=list)


def after(now: datetime) -> datetime:
    """The moment a run's outcome is recorded: after its preflight (stamped `now`), so that the
    history, which puts a transition before an evaluation of the same instant, reads in order."""
    return max(utcnow(), now + timedelta(microseconds=1))


def refuse(
    database: Database, action: repo.Action, reason: str, detail: dict[str, Any], now: datetime, *, evaluate: bool
) -> Outcome:
    """Abandon the approved action with `reason` (and a `preflight` / `refused` evaluation)."""
    with database.write() as conn:
        if evaluate:
            repo.record_evaluation(
                conn, action_id=action.id, workspace_id=action.workspace_id, kind="preflight",
                outcome="refused",
                detail={**detail, "summary": f"Executor preflight refused: {reason}"},
                engine_version=ENGINE_VERSION, data_as_of=None, at=now,
            )  # fmt: skip
        # A refusal of an action that moved meanwhile (e.g. rejected) leaves its evaluation only.
        with contextlib.suppress(TransitionRefused):
            repo.transition(
                conn, workspace_id=action.workspace_id, action_id=action.id, trigger="abandon", actor=EXECUTOR,
                note=reason, at=after(now),
            )  # fmt: skip
    return Outcome(action.id, "apply", "rejected", reason)
