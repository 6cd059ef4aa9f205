"""`POST /v1/actions` with parameters, read and written: the subject evaluated on exactly what the
engine would read at that moment (`engine_inputs.load`), and the action with its `create`
evaluation inserted in the caller's transaction. The decisions are `transforms.actions.creation`'s."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection

from transforms.actions import ActionType
from transforms.actions import proposals as gen
from transforms.actions.creation import Creation
from warehouse.actions import repository as repo
from warehouse.actions.engine_inputs import load
from warehouse.lake import Lake


def evaluate_subject(
    conn: Connection, lake: Lake, workspace_id: str, action_type: str, parameters: dict[str, Any], now: datetime
) -> tuple[gen.Evaluation | None, datetime | None]:
    """The engine's evaluation of the subject (None when the data cannot speak about it) and the
    `data_as_of` of what it read (None before any data)."""
    loaded = load(conn, lake, workspace_id, now)
    if loaded is None:
        return None, None
    signals, ctx = loaded
    return gen.evaluate(signals, ctx, action_type, parameters), gen.data_as_of(ctx.data_through)


def create_evaluated(
    conn: Connection,
    *,
    workspace_id: str,
    action_type: ActionType,
    parameters: dict[str, Any],
    made: Creation,
    actor: str,
    reason: str | None,
    key_id: str,
    data_as_of: datetime | None,
    at: datetime,
) -> repo.Action:
    """Insert the action a client proposed with parameters and its `create` evaluation."""
    action = repo.create_action(
        conn,
        workspace_id=workspace_id,
        action_type=action_type,
        content=made.content,
        actor=actor,
        origin="api",
        reason=reason,
        key_id=key_id,
        at=at,
        parameters=parameters,
        fingerprint=made.fingerprint,
        rollback_rules=made.rollback_rules,
    )
    repo.record_evaluation(
        conn,
        action_id=action.id,
        workspace_id=workspace_id,
        kind="create",
        outcome=made.outcome,
        detail=made.detail,
        engine_version=gen.ENGINE_VERSION,
        data_as_of=data_as_of,
        at=at,
    )
    return action
