"""The per-workspace action policy: read (the stored row, else the documented defaults) and write.

A workspace that never changed a threshold has no row, so a change of a default in
`transforms.actions.policy` reaches every such workspace; the first change stores the whole
policy (every field, validated by `Policy`), with who changed it and when, and an audit row
naming each field's old and new value, as every other admin change (`warehouse.audit`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from transforms.actions.policy import DEFAULT, FIELDS, Policy
from warehouse import audit
from warehouse.actions.tables import action_policies
from warehouse.db import utcnow
from warehouse.errors import NotFound
from warehouse.tables import workspaces


@dataclass(frozen=True)
class StoredPolicy:
    workspace_id: str
    policy: Policy
    # None while the workspace runs on the defaults (no row).
    updated_at: datetime | None
    updated_by: str | None

    @property
    def is_default(self) -> bool:
        return self.updated_at is None


def read_policy(conn: Connection, *, workspace_id: str) -> StoredPolicy:
    """The workspace's policy; NotFound for an unknown workspace."""
    _require_workspace(conn, workspace_id)
    row = conn.execute(action_policies.select().where(action_policies.c.workspace_id == workspace_id)).first()
    if row is None:
        return StoredPolicy(workspace_id, DEFAULT, None, None)
    values = row._mapping
    return StoredPolicy(
        workspace_id,
        Policy(**{name: values[name] for name in FIELDS}),
        values["updated_at"],
        values["updated_by"],
    )


def policy_for(conn: Connection, *, workspace_id: str) -> Policy:
    """Just the thresholds (the engine, the executor and the monitor read these)."""
    return read_policy(conn, workspace_id=workspace_id).policy


def change_policy(
    conn: Connection, *, workspace_id: str, changes: dict[str, Any], actor: str, at: datetime | None = None
) -> StoredPolicy:
    """Apply `changes` to the current policy (PolicyProblem names a bad field, nothing written);
    an empty change or one that changes nothing writes nothing."""
    current = read_policy(conn, workspace_id=workspace_id)
    policy = current.policy.changed(**changes)
    diff = {
        name: [getattr(current.policy, name), getattr(policy, name)]
        for name in FIELDS
        if getattr(current.policy, name) != getattr(policy, name)
    }
    if not diff:
        return current
    now = at or utcnow()
    values = {**policy.to_dict(), "updated_at": now, "updated_by": actor}
    if current.is_default:
        conn.execute(action_policies.insert().values(workspace_id=workspace_id, **values))
    else:
        conn.execute(action_policies.update().where(action_policies.c.workspace_id == workspace_id).values(**values))
    audit.record(
        conn,
        workspace_id=workspace_id,
        actor=actor,
        action="action_policy.changed",
        subject_id=workspace_id,
        detail={"changed": diff},
    )
    return StoredPolicy(workspace_id, policy, now, actor)


def _require_workspace(conn: Connection, workspace_id: str) -> None:
    found = conn.execute(sa.select(workspaces.c.id).where(workspaces.c.id == workspace_id)).first()
    if found is None:
        raise NotFound(f"no workspace {workspace_id}")
