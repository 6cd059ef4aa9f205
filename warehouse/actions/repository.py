"""Actions: create, list, read, and move through the state machine of `transforms.actions`.

Every transition is ONE statement, `UPDATE actions SET ... WHERE id = :id AND workspace_id = :ws
AND status IN (<allowed sources>) RETURNING ...`: two simultaneous approvals race on the row, the
database serialises them, and exactly one sees its row updated; the other gets no row and answers
409. The audit row and the webhook event are written in the same transaction as the update.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from transforms import actions as rules
from transforms.ids import new_id
from transforms.webhooks import payloads
from warehouse.actions.tables import action_transitions, actions
from warehouse.db import utcnow
from warehouse.errors import NotFound, TransitionRefused
from warehouse.webhooks.outbox import emit_event


@dataclass(frozen=True)
class Action:
    id: str
    workspace_id: str
    type: str
    status: str
    title: str
    rationale: str
    reason: str | None
    expected_impact: dict[str, Any]
    data_signals: list[dict[str, str]]
    guardrail_checks: list[dict[str, Any]]
    rollback_conditions: list[str]
    created_by: str
    created_at: datetime
    updated_at: datetime
    approved_at: datetime | None
    approved_by: str | None
    rejected_at: datetime | None
    rejected_by: str | None
    rolled_back_at: datetime | None
    previous_status: str | None = None

    def webhook_data(self) -> payloads.ActionEventData:
        """The `data` of this action's webhook events, built by the same function as the samples
        `POST /v1/webhooks/test` sends (`transforms.webhooks.payloads`)."""
        return payloads.action_event(
            payloads.action_summary(
                id=self.id,
                type=self.type,
                status=self.status,
                title=self.title,
                rationale=self.rationale,
                expected_impact=self.expected_impact,
                created_at=self.created_at,
                approved_at=self.approved_at,
                approved_by=self.approved_by,
            )
        )


@dataclass(frozen=True)
class TransitionRecord:
    trigger: str
    from_status: str | None
    to_status: str
    actor: str
    key_id: str | None
    note: str | None
    created_at: datetime


_COLUMNS = [actions.c[name] for name in Action.__dataclass_fields__]


def _action(row: Any) -> Action:
    return Action(**row._mapping)


def new_action_id() -> str:
    """An id before the row exists, so content can be generated from it (deterministic seed)."""
    return new_id("act")


def create_action(
    conn: Connection,
    *,
    workspace_id: str,
    action_type: str,
    content: rules.ActionContent,
    actor: str,
    reason: str | None = None,
    key_id: str | None = None,
    at: datetime | None = None,
    action_id: str | None = None,
) -> Action:
    """Insert an action: `ready` when its guardrails pass, else `draft`; audit row and
    `action.created` webhook event in the same transaction."""
    now = at or utcnow()
    status = "ready" if content.guardrails_pass else "draft"
    values: dict[str, Any] = {
        "id": action_id or new_id("act"),
        "workspace_id": workspace_id,
        "type": rules.canonical_type(action_type),
        "status": status,
        "previous_status": None,
        "title": content.title,
        "rationale": content.rationale,
        "reason": reason,
        "expected_impact": content.expected_impact,
        "data_signals": content.data_signals,
        "guardrail_checks": content.guardrail_checks,
        "rollback_conditions": content.rollback_conditions,
        "created_by": actor,
        "created_at": now,
        "updated_at": now,
        "approved_at": None,
        "approved_by": None,
        "rejected_at": None,
        "rejected_by": None,
        "rolled_back_at": None,
    }
    conn.execute(actions.insert().values(**values))
    action = Action(**values)
    _record(conn, action, trigger="create", from_status=None, actor=actor, key_id=key_id, note=reason, at=now)
    emit_event(conn, workspace_id=workspace_id, event_type=rules.CREATED_WEBHOOK_EVENT, data=action.webhook_data())
    return action


def transition(
    conn: Connection,
    *,
    workspace_id: str,
    action_id: str,
    trigger: str,
    actor: str,
    note: str | None = None,
    key_id: str | None = None,
    at: datetime | None = None,
) -> Action:
    """Fire `trigger` on an action in one conditional UPDATE; NotFound or TransitionRefused otherwise."""
    now = at or utcnow()
    spec = rules.TRANSITIONS[trigger]
    # Which statuses the trigger may leave from depends on the type (rollback); the type never
    # changes, so each type's allowed sources are spelled out in the one WHERE clause.
    allowed = sa.or_(
        *[
            sa.and_(actions.c.type == t, actions.c.status.in_(sorted(rules.allowed_sources(trigger, t))))
            for t in rules.ACTION_TYPES
            if rules.allowed_sources(trigger, t)
        ]
    )
    values: dict[str, Any] = {"previous_status": actions.c.status, "status": spec.target, "updated_at": now}
    if trigger == "approve":
        values.update(approved_at=now, approved_by=actor)
    elif trigger == "reject":
        values.update(rejected_at=now, rejected_by=actor)
    elif trigger == "rollback":
        values.update(rolled_back_at=now)
    row = conn.execute(
        actions.update()
        .where(actions.c.id == action_id, actions.c.workspace_id == workspace_id, allowed)
        .values(**values)
        .returning(*_COLUMNS)
    ).first()
    if row is None:
        current = get_action(conn, workspace_id=workspace_id, action_id=action_id)  # NotFound if absent
        raise TransitionRefused(rules.refusal(trigger, current.type, current.status), current.status)
    action = _action(row)
    _record(
        conn, action, trigger=trigger, from_status=action.previous_status, actor=actor, key_id=key_id, note=note, at=now
    )
    if spec.webhook_event:
        emit_event(conn, workspace_id=workspace_id, event_type=spec.webhook_event, data=action.webhook_data())
    return action


def _record(
    conn: Connection,
    action: Action,
    *,
    trigger: str,
    from_status: str | None,
    actor: str,
    key_id: str | None,
    note: str | None,
    at: datetime,
) -> None:
    conn.execute(
        action_transitions.insert().values(
            action_id=action.id,
            workspace_id=action.workspace_id,
            trigger=trigger,
            from_status=from_status,
            to_status=action.status,
            actor=actor,
            key_id=key_id,
            note=note,
            created_at=at,
        )
    )


def get_action(conn: Connection, *, workspace_id: str, action_id: str) -> Action:
    row = conn.execute(
        sa.select(*_COLUMNS).where(actions.c.id == action_id, actions.c.workspace_id == workspace_id)
    ).first()
    if row is None:
        raise NotFound(f"No action {action_id} in this workspace")
    return _action(row)


def list_actions(
    conn: Connection, *, workspace_id: str, status: str | None = None, limit: int = 20, offset: int = 0
) -> tuple[list[Action], int]:
    """One page, newest first then id (descending), and the total matching the filter."""
    where = [actions.c.workspace_id == workspace_id]
    if status is not None:
        where.append(actions.c.status == status)
    total = conn.execute(sa.select(sa.func.count()).select_from(actions).where(*where)).scalar_one()
    rows = conn.execute(
        sa.select(*_COLUMNS)
        .where(*where)
        .order_by(actions.c.created_at.desc(), actions.c.id.desc())
        .limit(limit)
        .offset(offset)
    ).all()
    return [_action(r) for r in rows], total


def history(conn: Connection, *, workspace_id: str, action_id: str) -> list[TransitionRecord]:
    rows = conn.execute(
        sa.select(
            action_transitions.c.trigger,
            action_transitions.c.from_status,
            action_transitions.c.to_status,
            action_transitions.c.actor,
            action_transitions.c.key_id,
            action_transitions.c.note,
            action_transitions.c.created_at,
        )
        .where(action_transitions.c.action_id == action_id, action_transitions.c.workspace_id == workspace_id)
        .order_by(action_transitions.c.id)
    ).all()
    return [TransitionRecord(**r._mapping) for r in rows]
