"""A table of connected things with sealed credentials: integrations and ad accounts.

Both keep one row per connected thing with readable `options`, the secrets sealed under the
instance key (`transforms.sealing`, AES-GCM, bound to the row's id, for the table's own
purpose) in one column, and a workspace it belongs to. `Connected` reads and seals such a row
once; each repository keeps its own row type, its rules of connecting and its wording.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from transforms import sealing
from transforms.integrations.kinds import ValidConfig
from warehouse.errors import NotFound, TransitionRefused

T = TypeVar("T")


@dataclass(frozen=True)
class Connected:
    table: sa.Table
    label: str  # how a message names a row: "Integration", "Ad account"
    sealed: str  # the column holding the sealed secrets (NULL once disconnected)
    purpose: str  # the sealing purpose, one per table

    def record(self, cls: Callable[..., T], row: Row[Any]) -> T:
        """The row as the repository's dataclass `cls` (its fields are columns); the JSON
        `options` and `credential_hints` as fresh dicts."""
        values = {name: getattr(row, name) for name in inspect.signature(cls).parameters}
        for name in ("options", "credential_hints"):
            values[name] = dict(values[name] or {})
        return cls(**values)

    def seal(self, instance_key: str, row_id: str, secrets: dict[str, str]) -> str:
        plaintext = json.dumps(secrets, sort_keys=True).encode()
        return sealing.seal(instance_key, self.purpose, plaintext, context=row_id)

    def in_workspace(self, conn: Connection, workspace_id: str) -> list[Row[Any]]:
        """The workspace's rows, oldest first."""
        t = self.table
        return list(conn.execute(t.select().where(t.c.workspace_id == workspace_id).order_by(t.c.created_at, t.c.id)))

    def one(self, conn: Connection, row_id: str, workspace_id: str | None) -> Row[Any]:
        """The row; `NotFound` when there is none, or (a workspace given) it is another's. The
        repositories expose this as `get_*(workspace_id=…)` and `get_*_for_operator`, so that a
        read across workspaces is always named as one."""
        t = self.table
        query = t.select().where(t.c.id == row_id)
        if workspace_id is not None:
            query = query.where(t.c.workspace_id == workspace_id)
        row = conn.execute(query).first()
        if row is None:
            raise NotFound(f"{self.label} {row_id} not found")
        return row

    def config(self, conn: Connection, row_id: str, instance_key: str) -> ValidConfig:
        """The row's config with its secrets unsealed; `TransitionRefused` once disconnected."""
        t = self.table
        row = conn.execute(sa.select(t.c.options, t.c[self.sealed]).where(t.c.id == row_id)).first()
        if row is None:
            raise NotFound(f"{self.label} {row_id} not found")
        sealed = row[1]
        if sealed is None:
            raise TransitionRefused(f"{self.label} {row_id} is disconnected: it has no credentials", "disconnected")
        secrets = json.loads(sealing.unseal(instance_key, self.purpose, sealed, context=row_id))
        return ValidConfig(options=dict(row.options or {}), secrets=secrets)
