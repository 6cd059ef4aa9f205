"""The ledger of the executor's platform writes (`action_executions`): one row per leg and kind.

A leg's row is written (`intent`) before its call and updated after each step (`sent`,
`verified`, `failed`, `conflict`, `compensated`), each in its own short transaction, so a crash
between a call and its record leaves a row that says what was about to happen; a re-run reads
it and compares the live value with `before` and `after` before writing anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from transforms.integrations.errors import truncate
from warehouse.actions.tables import action_executions, action_transitions, actions
from warehouse.db import utcnow
from warehouse.errors import NotFound


@dataclass(frozen=True)
class Execution:
    id: int
    action_id: str
    workspace_id: str
    ad_account_id: str | None
    kind: str
    leg: int
    platform: str
    object_type: str
    object_id: str
    field: str
    before: Any
    after: Any
    state: str
    attempts: int
    last_request: Any
    last_response_code: int | None
    last_response: str | None
    created_at: datetime
    updated_at: datetime


def _row(row: Any) -> Execution:
    return Execution(**{name: getattr(row, name) for name in Execution.__dataclass_fields__})


def executions(conn: Connection, *, action_id: str, kind: str | None = None) -> list[Execution]:
    """An action's ledger rows (of one kind), by kind then leg."""
    query = action_executions.select().where(action_executions.c.action_id == action_id)
    if kind is not None:
        query = query.where(action_executions.c.kind == kind)
    rows = conn.execute(query.order_by(action_executions.c.kind, action_executions.c.leg))
    return [_row(r) for r in rows]


def record_intent(
    conn: Connection,
    *,
    action_id: str,
    workspace_id: str,
    ad_account_id: str | None,
    kind: str,
    leg: int,
    platform: str,
    object_type: str,
    object_id: str,
    field: str,
    before: Any,
    after: Any,
    now: datetime | None = None,
) -> Execution:
    """The leg's row in state `intent`; an existing row (a re-run) is returned unchanged."""
    now = now or utcnow()
    existing = conn.execute(
        action_executions.select().where(
            action_executions.c.action_id == action_id,
            action_executions.c.kind == kind,
            action_executions.c.leg == leg,
        )
    ).first()
    if existing is not None:
        return _row(existing)
    conn.execute(
        action_executions.insert().values(
            action_id=action_id,
            workspace_id=workspace_id,
            ad_account_id=ad_account_id,
            kind=kind,
            leg=leg,
            platform=platform,
            object_type=object_type,
            object_id=object_id,
            field=field,
            before=before,
            after=after,
            state="intent",
            attempts=0,
            created_at=now,
            updated_at=now,
        )
    )
    return _row(
        conn.execute(
            action_executions.select().where(
                action_executions.c.action_id == action_id,
                action_executions.c.kind == kind,
                action_executions.c.leg == leg,
            )
        ).one()
    )


def update(
    conn: Connection,
    execution_id: int,
    *,
    state: str,
    attempted: bool = False,
    request: Any = None,
    response_code: int | None = None,
    response: str | None = None,
    now: datetime | None = None,
) -> None:
    """Move a row to `state`; `attempted` counts a platform write; the last request/response kept."""
    values: dict[str, Any] = {"state": state, "updated_at": now or utcnow()}
    if attempted:
        values["attempts"] = action_executions.c.attempts + 1
    if request is not None:
        values["last_request"] = request
    if response_code is not None:
        values["last_response_code"] = response_code
    if response is not None:
        values["last_response"] = truncate(response)
    conn.execute(action_executions.update().where(action_executions.c.id == execution_id).values(**values))


def work_after(conn: Connection, *, after_transition_id: int) -> list[tuple[str, str, int]]:
    """What the executor sensor should run, as (action_id, kind, transition id), oldest first:
    every approval (`approve` transition of an action still `approved`) and every rollback of an
    action whose apply legs were verified (something to revert), with a transition id above the
    sensor's cursor. The transition id makes each approval (and rollback) its own run key."""
    approve = (
        sa.select(action_transitions.c.action_id, sa.literal("apply").label("kind"), action_transitions.c.id)
        .join(actions, actions.c.id == action_transitions.c.action_id)
        .where(
            action_transitions.c.trigger == "approve",
            action_transitions.c.id > after_transition_id,
            actions.c.status == "approved",
        )
    )
    applied = sa.select(action_executions.c.action_id).where(
        action_executions.c.kind == "apply", action_executions.c.state == "verified"
    )
    rollback = (
        sa.select(action_transitions.c.action_id, sa.literal("revert").label("kind"), action_transitions.c.id)
        .join(actions, actions.c.id == action_transitions.c.action_id)
        .where(
            action_transitions.c.trigger == "rollback",
            action_transitions.c.id > after_transition_id,
            actions.c.status == "rolled_back",
            action_transitions.c.action_id.in_(applied),
        )
    )
    rows = conn.execute(sa.union_all(approve, rollback).subquery().select().order_by(sa.text("id"))).all()
    return [(r[0], r[1], int(r[2])) for r in rows]


def workspace_of(conn: Connection, *, action_id: str) -> str:
    """The workspace of an action (the executor's job is given the action id only)."""
    found = conn.execute(sa.select(actions.c.workspace_id).where(actions.c.id == action_id)).scalar_one_or_none()
    if found is None:
        raise NotFound(f"No action {action_id}")
    return str(found)
