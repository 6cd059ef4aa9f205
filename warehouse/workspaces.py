"""Workspaces (tenants), their API keys and apps."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from transforms.ids import hash_api_key, key_prefix, new_api_key, new_id, new_publishable_key
from warehouse import audit
from warehouse.db import utcnow
from warehouse.entitlements.cache import notify as notify_entitlements
from warehouse.errors import NotFound
from warehouse.tables import SCOPES, Scope, api_keys, apps, workspaces


@dataclass(frozen=True)
class Workspace:
    id: str
    name: str
    reporting_currency: str
    timezone: str
    created_at: datetime


@dataclass(frozen=True)
class Principal:
    """Who is calling the v1 API: the workspace the key belongs to and what it may do."""

    key_id: str
    workspace_id: str
    scope: Scope

    @property
    def can_write(self) -> bool:
        return self.scope == "read_write"


@dataclass(frozen=True)
class IssuedKey:
    key_id: str
    api_key: str


@dataclass(frozen=True)
class ApiKey:
    """A key as listings show it: never the secret, only its first characters."""

    id: str
    workspace_id: str
    scope: Scope
    key_prefix: str
    created_at: datetime
    rotated_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None


# `last_used_at` is written at most this often per key: a listing's "last used", not an access log.
KEY_USE_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True)
class App:
    id: str
    workspace_id: str
    name: str
    publishable_key: str


def create_workspace(
    conn: Connection, *, name: str, reporting_currency: str = "USD", timezone: str = "UTC", actor: str = "cli"
) -> Workspace:
    ws = Workspace(
        id=new_id("ws"),
        name=name,
        reporting_currency=reporting_currency,
        timezone=timezone,
        created_at=utcnow(),
    )
    conn.execute(workspaces.insert().values(**ws.__dict__))
    audit.record(conn, workspace_id=ws.id, actor=actor, action="workspace.created", subject_id=ws.id)
    return ws


def get_workspace(conn: Connection, workspace_id: str) -> Workspace:
    row = conn.execute(workspaces.select().where(workspaces.c.id == workspace_id)).first()
    if row is None:
        raise NotFound(f"No workspace {workspace_id}")
    return Workspace(**row._mapping)


def count_workspaces(conn: Connection) -> int:
    return conn.execute(sa.select(sa.func.count()).select_from(workspaces)).scalar_one()


def create_key(conn: Connection, *, workspace_id: str, scope: Scope, actor: str = "cli") -> IssuedKey:
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}")
    get_workspace(conn, workspace_id)
    key, key_id = new_api_key(), new_id("key")
    conn.execute(
        api_keys.insert().values(
            id=key_id,
            workspace_id=workspace_id,
            scope=scope,
            key_hash=hash_api_key(key),
            key_prefix=key_prefix(key),
            created_at=utcnow(),
        )
    )
    audit.record(
        conn,
        workspace_id=workspace_id,
        actor=actor,
        action="api_key.created",
        subject_id=key_id,
        detail={"scope": scope},
    )
    return IssuedKey(key_id=key_id, api_key=key)


def rotate_key(conn: Connection, *, key_id: str, actor: str = "cli") -> IssuedKey:
    """Replace the key's secret in one statement: the old secret stops working at commit. The
    key's `last_used_at` starts again at "never": it then tells whether the new secret is in use."""
    key = new_api_key()
    now = utcnow()
    row = conn.execute(
        api_keys.update()
        .where(api_keys.c.id == key_id, api_keys.c.revoked_at.is_(None))
        .values(key_hash=hash_api_key(key), key_prefix=key_prefix(key), rotated_at=now, last_used_at=None)
        .returning(api_keys.c.workspace_id)
    ).first()
    if row is None:
        raise NotFound(f"No active API key {key_id}")
    audit.record(conn, workspace_id=row.workspace_id, actor=actor, action="api_key.rotated", subject_id=key_id)
    return IssuedKey(key_id=key_id, api_key=key)


def revoke_key(conn: Connection, *, key_id: str, actor: str = "cli") -> None:
    row = conn.execute(
        api_keys.update()
        .where(api_keys.c.id == key_id, api_keys.c.revoked_at.is_(None))
        .values(revoked_at=utcnow())
        .returning(api_keys.c.workspace_id)
    ).first()
    if row is None:
        raise NotFound(f"No active API key {key_id}")
    audit.record(conn, workspace_id=row.workspace_id, actor=actor, action="api_key.revoked", subject_id=key_id)


def list_keys(conn: Connection, workspace_id: str) -> list[ApiKey]:
    """The workspace's keys, revoked ones included (they stay listed, marked), oldest first."""
    rows = conn.execute(
        sa.select(*(api_keys.c[f] for f in ApiKey.__dataclass_fields__))
        .where(api_keys.c.workspace_id == workspace_id)
        .order_by(api_keys.c.created_at, api_keys.c.id)
    )
    return [ApiKey(**r._mapping) for r in rows]


def get_key(conn: Connection, *, workspace_id: str, key_id: str) -> ApiKey:
    """The workspace's key; another workspace's is NotFound, as an unknown one."""
    row = conn.execute(
        sa.select(*(api_keys.c[f] for f in ApiKey.__dataclass_fields__)).where(
            api_keys.c.id == key_id, api_keys.c.workspace_id == workspace_id
        )
    ).first()
    if row is None:
        raise NotFound(f"No API key {key_id}")
    return ApiKey(**row._mapping)


def note_key_used(conn: Connection, *, key_id: str, now: datetime) -> bool:
    """Record that v1 accepted the key at `now`, unless that was already recorded less than
    `KEY_USE_RESOLUTION` ago (the condition is in the UPDATE, so concurrent workers write it
    once). Whether a row was written."""
    return (
        conn.execute(
            api_keys.update()
            .where(
                api_keys.c.id == key_id,
                sa.or_(api_keys.c.last_used_at.is_(None), api_keys.c.last_used_at <= now - KEY_USE_RESOLUTION),
            )
            .values(last_used_at=now)
        ).rowcount
        == 1
    )


def authenticate(conn: Connection, api_key: str) -> Principal | None:
    """The principal for a presented key, or None if unknown, rotated away or revoked."""
    row = conn.execute(
        sa.select(api_keys.c.id, api_keys.c.workspace_id, api_keys.c.scope).where(
            api_keys.c.key_hash == hash_api_key(api_key), api_keys.c.revoked_at.is_(None)
        )
    ).first()
    if row is None:
        return None
    return Principal(key_id=row.id, workspace_id=row.workspace_id, scope=row.scope)


def create_app(conn: Connection, *, workspace_id: str, name: str, actor: str = "cli") -> App:
    app = App(id=new_id("app"), workspace_id=workspace_id, name=name, publishable_key=new_publishable_key())
    conn.execute(apps.insert().values(**app.__dict__, created_at=utcnow()))
    audit.record(conn, workspace_id=workspace_id, actor=actor, action="app.created", subject_id=app.id)
    return app


def revoke_app(conn: Connection, *, app_id: str, actor: str = "cli") -> None:
    """The app's publishable key stops working at commit, on every worker: the entitlement
    read cache (`warehouse.entitlements.cache`) drops the app when this commits."""
    row = conn.execute(
        apps.update()
        .where(apps.c.id == app_id, apps.c.revoked_at.is_(None))
        .values(revoked_at=utcnow())
        .returning(apps.c.workspace_id)
    ).first()
    if row is None:
        raise NotFound(f"No active app {app_id}")
    notify_entitlements(conn, app_id, None)
    audit.record(conn, workspace_id=row.workspace_id, actor=actor, action="app.revoked", subject_id=app_id)


def app_by_id(conn: Connection, app_id: str) -> App | None:
    """An active (not revoked) app."""
    return _active_app(conn, apps.c.id == app_id)


def app_for_key(conn: Connection, publishable_key: str) -> App | None:
    return _active_app(conn, apps.c.publishable_key == publishable_key)


def _active_app(conn: Connection, which: sa.ColumnElement[bool]) -> App | None:
    row = conn.execute(
        sa.select(apps.c.id, apps.c.workspace_id, apps.c.name, apps.c.publishable_key).where(
            which, apps.c.revoked_at.is_(None)
        )
    ).first()
    return None if row is None else App(**row._mapping)
