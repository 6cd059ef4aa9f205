"""Actions: create, list, read, and move through the state machine of `transforms.actions`.

Every transition is ONE statement, `UPDATE actions SET ... WHERE id = :id AND workspace_id = :ws
AND status IN (<allowed sources>) RETURNING ...`: two simultaneous approvals race on the row, the
database serialises them, and exactly one sees its row updated; the other gets no row and answers
409. The audit row and the webhook event are written in the same transaction as the update.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from transforms import actions as rules
from transforms.actions.rules import RollbackRule, render
from transforms.ids import new_id
from transforms.webhooks import payloads
from warehouse.actions.tables import action_evaluations, action_transitions, actions
from warehouse.db import utcnow
from warehouse.errors import Conflict, NotFound, TransitionRefused
from warehouse.webhooks.outbox import emit_event


class AlreadyOpen(Conflict):
    """An open action (draft, ready, approved, running) already has this fingerprint: the engine
    re-evaluates that action (`action_id`) instead of opening a second one."""

    def __init__(self, action_id: str, fingerprint: str) -> None:
        super().__init__(f"Action {action_id} with the same fingerprint is still open")
        self.action_id = action_id
        self.fingerprint = fingerprint


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
    # The typed subject (None for a client's own proposal and the demo's actions).
    parameters: dict[str, Any] | None = None
    fingerprint: str | None = None
    # `RollbackRule.to_dict()` of each rule; `rollback_conditions` is their rendering.
    rollback_rules: list[dict[str, Any]] = field(default_factory=list)
    origin: str = "api"
    effective_at: datetime | None = None
    completed_at: datetime | None = None

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


@dataclass(frozen=True)
class EvaluationRecord:
    """One decision about an action that is not a transition (`action_evaluations`)."""

    id: int
    action_id: str
    kind: str
    outcome: str
    engine_version: str | None
    data_as_of: datetime | None
    detail: dict[str, Any]
    created_at: datetime


HistoryEntry = TransitionRecord | EvaluationRecord


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
    origin: rules.Origin,
    reason: str | None = None,
    key_id: str | None = None,
    at: datetime | None = None,
    action_id: str | None = None,
    parameters: dict[str, Any] | None = None,
    fingerprint: str | None = None,
    rollback_rules: Sequence[RollbackRule] = (),
) -> Action:
    """Insert an action: `ready` when its guardrails pass, else `draft`; audit row and
    `action.created` webhook event in the same transaction.

    With `rollback_rules`, `rollback_conditions` is their rendering (the content must not carry
    sentences of its own: a condition no rule stands behind is one the monitor cannot check).
    With a `fingerprint` another open action holds, AlreadyOpen names that action and nothing is
    written; the caller's transaction stays usable (the insert runs in a savepoint).
    """
    if origin not in rules.ORIGINS:
        raise ValueError(f"unknown origin {origin!r}; expected one of {', '.join(rules.ORIGINS)}")
    if rollback_rules and content.rollback_conditions:
        raise ValueError("rollback_conditions are rendered from rollback_rules; pass one or the other")
    if fingerprint is not None:
        holder = open_action_with_fingerprint(conn, workspace_id=workspace_id, fingerprint=fingerprint)
        if holder is not None:
            raise AlreadyOpen(holder, fingerprint)
    conditions = [render(rule) for rule in rollback_rules] if rollback_rules else list(content.rollback_conditions)
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
        "rollback_conditions": conditions,
        "created_by": actor,
        "created_at": now,
        "updated_at": now,
        "approved_at": None,
        "approved_by": None,
        "rejected_at": None,
        "rejected_by": None,
        "rolled_back_at": None,
        "parameters": parameters,
        "fingerprint": fingerprint,
        "rollback_rules": [rule.to_dict() for rule in rollback_rules],
        "origin": origin,
        "effective_at": None,
        "completed_at": None,
    }
    try:
        with conn.begin_nested():
            conn.execute(actions.insert().values(**values))
    except sa.exc.IntegrityError:
        # Lost a race on the partial unique index: another run opened the same proposal between
        # the check above and this insert.
        holder = (
            None
            if fingerprint is None
            else open_action_with_fingerprint(conn, workspace_id=workspace_id, fingerprint=fingerprint)
        )
        if holder is None or fingerprint is None:
            raise
        raise AlreadyOpen(holder, fingerprint) from None
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
    effective_at: datetime | None = None,
) -> Action:
    """Fire `trigger` on an action in one conditional UPDATE; NotFound or TransitionRefused otherwise.

    `effective_at` (with `start`): when the executor's platform change took effect.
    """
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
    elif trigger in rules.REJECTING_TRIGGERS:
        values.update(rejected_at=now, rejected_by=actor)
    elif trigger == "rollback":
        values.update(rolled_back_at=now)
    elif trigger == "complete":
        values.update(completed_at=now)
    elif trigger == "start" and effective_at is not None:
        values.update(effective_at=effective_at)
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
    conn: Connection,
    *,
    workspace_id: str,
    status: str | None = None,
    action_type: str | None = None,
    limit: int = 20,
    offset: int = 0,
) -> tuple[list[Action], int]:
    """One page, newest first then id (descending), and the total matching the filters."""
    where = [actions.c.workspace_id == workspace_id]
    if status is not None:
        where.append(actions.c.status == status)
    if action_type is not None:
        where.append(actions.c.type == action_type)
    total = conn.execute(sa.select(sa.func.count()).select_from(actions).where(*where)).scalar_one()
    rows = conn.execute(
        sa.select(*_COLUMNS)
        .where(*where)
        .order_by(actions.c.created_at.desc(), actions.c.id.desc())
        .limit(limit)
        .offset(offset)
    ).all()
    return [_action(r) for r in rows], total


def open_action_with_fingerprint(conn: Connection, *, workspace_id: str, fingerprint: str) -> str | None:
    """The id of the open action holding `fingerprint`, if any (the partial unique index's rows)."""
    return conn.execute(
        sa.select(actions.c.id).where(
            actions.c.workspace_id == workspace_id,
            actions.c.fingerprint == fingerprint,
            actions.c.status.in_(rules.OPEN_STATUSES),
        )
    ).scalar_one_or_none()


def record_evaluation(
    conn: Connection,
    *,
    action_id: str,
    kind: str,
    outcome: str,
    detail: dict[str, Any],
    engine_version: str | None,
    data_as_of: datetime | None,
    workspace_id: str,
    at: datetime | None = None,
) -> EvaluationRecord:
    """Append one evaluation to an action's audit (NotFound for an unknown action, or one of
    another workspace). The vocabularies are `transforms.actions`'s."""
    if kind not in rules.EVALUATION_KINDS:
        raise ValueError(f"unknown evaluation kind {kind!r}; expected one of {', '.join(rules.EVALUATION_KINDS)}")
    if outcome not in rules.EVALUATION_OUTCOMES:
        raise ValueError(f"unknown outcome {outcome!r}; expected one of {', '.join(rules.EVALUATION_OUTCOMES)}")
    owner = conn.execute(
        sa.select(actions.c.workspace_id).where(actions.c.id == action_id, actions.c.workspace_id == workspace_id)
    ).scalar_one_or_none()
    if owner is None:
        raise NotFound(f"No action {action_id} in this workspace")
    now = at or utcnow()
    values = {
        "action_id": action_id,
        "workspace_id": owner,
        "kind": kind,
        "outcome": outcome,
        "engine_version": engine_version,
        "data_as_of": data_as_of,
        "detail": detail,
        "created_at": now,
    }
    new = conn.execute(action_evaluations.insert().values(**values).returning(action_evaluations.c.id)).scalar_one()
    del values["workspace_id"]
    return EvaluationRecord(id=new, **values)


def evaluations(conn: Connection, *, workspace_id: str, action_id: str) -> list[EvaluationRecord]:
    """An action's evaluations, oldest first."""
    rows = conn.execute(
        sa.select(
            action_evaluations.c.id,
            action_evaluations.c.action_id,
            action_evaluations.c.kind,
            action_evaluations.c.outcome,
            action_evaluations.c.engine_version,
            action_evaluations.c.data_as_of,
            action_evaluations.c.detail,
            action_evaluations.c.created_at,
        )
        .where(action_evaluations.c.action_id == action_id, action_evaluations.c.workspace_id == workspace_id)
        .order_by(action_evaluations.c.id)
    ).all()
    return [EvaluationRecord(**r._mapping) for r in rows]


def history(conn: Connection, *, workspace_id: str, action_id: str) -> list[HistoryEntry]:
    """Transitions and evaluations merged, oldest first; at the same instant a transition comes
    before an evaluation (the engine opens an action, then records the proposal that opened it)."""
    steps: list[HistoryEntry] = [*transitions(conn, workspace_id=workspace_id, action_id=action_id)]
    steps += evaluations(conn, workspace_id=workspace_id, action_id=action_id)
    # sorted() is stable: each list keeps its own (id) order within one instant.
    return sorted(steps, key=lambda s: (s.created_at, isinstance(s, EvaluationRecord)))


def transitions(conn: Connection, *, workspace_id: str, action_id: str) -> list[TransitionRecord]:
    """An action's status changes, oldest first."""
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


def running_actions(conn: Connection, *, workspace_id: str) -> list[Action]:
    """The workspace's `running` actions, oldest first: what the monitor checks."""
    return _running(conn, actions.c.workspace_id == workspace_id)


def running_actions_for_operator(conn: Connection) -> list[Action]:
    """Every workspace's `running` actions, oldest first: the monitor's and `flokit refresh`'s
    operator path, which then checks them one workspace at a time."""
    return _running(conn, sa.true())


def _running(conn: Connection, tenancy: Any) -> list[Action]:
    rows = conn.execute(
        sa.select(*_COLUMNS).where(actions.c.status == "running", tenancy).order_by(actions.c.created_at, actions.c.id)
    ).all()
    return [_action(r) for r in rows]
