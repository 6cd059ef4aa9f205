"""Integrations and their syncs: connect, read, disconnect, queue a sync, run it to its end.

Every function takes the caller's connection and changes state in the caller's transaction, so
a sync's end (status, counts, the connector's state, the `integration.error` event) commits as
one change or not at all. The credentials are sealed here and nowhere else: a caller passes the
instance key to connect and to read the config back for a run, and gets the secrets only as a
`ValidConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from transforms.ids import new_id
from transforms.integrations.errors import ErrorCode, truncate
from transforms.integrations.kinds import KINDS, ValidConfig, kind_of, secret_hint
from transforms.integrations.status import ACTIVE_SYNC_STATUSES, SyncTrigger, after_sync
from transforms.webhooks.payloads import integration_sync_failed
from warehouse import audit
from warehouse.connected import Connected
from warehouse.db import utcnow
from warehouse.errors import AlreadyExists, Conflict, NotFound, TransitionRefused
from warehouse.integrations.tables import integration_syncs, integrations
from warehouse.queue import Subject, WorkQueue
from warehouse.tables import apps, workspaces
from warehouse.webhooks.outbox import emit_event

SEAL_PURPOSE = "integration-credentials"
# Types whose `app_id` option names a FloKit app (the ledger their notifications update); other
# types' `app_id` is the provider's own (AppsFlyer's app id).
FLOKIT_APP_TYPES = frozenset(
    {"payment_processor", "subscription_provider_a", "subscription_provider_b", "ios_store_connect", "android_store"}
)
HISTORY_LIMIT = 20
ROWS = Connected(integrations, "Integration", sealed="credentials", purpose=SEAL_PURPOSE)
# `active_for` holds the integration id while a sync is open: the table's one-open-sync rule.
QUEUE = WorkQueue(integration_syncs, subject="integration_id", waiting="queued", ordered_by="queued_at")


@dataclass(frozen=True)
class Integration:
    id: str
    workspace_id: str
    type: str
    status: str
    error_message: str | None
    last_synced_at: datetime | None
    options: dict[str, Any]
    credential_hints: dict[str, str]
    cadence_hours: int
    created_at: datetime


@dataclass(frozen=True)
class Sync:
    id: str
    integration_id: str
    workspace_id: str
    trigger: str
    status: str
    queued_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    run_id: str | None
    records_written: int
    earliest_record_at: datetime | None
    error_code: str | None
    error_message: str | None


@dataclass(frozen=True)
class StartedSync:
    """What a run needs: the sync, its integration, the unsealed config and the connector state."""

    sync: Sync
    integration: Integration
    config: ValidConfig
    state: dict[str, Any]


def _integration(row: Row[Any]) -> Integration:
    return ROWS.record(Integration, row)


def _sync(row: Row[Any]) -> Sync:
    return Sync(**{name: getattr(row, name) for name in Sync.__dataclass_fields__})


# --- the operator's side -------------------------------------------------------------------------


def connect(
    conn: Connection,
    *,
    workspace_id: str,
    integration_type: str,
    config: ValidConfig,
    instance_key: str,
    actor: str,
    now: datetime | None = None,
) -> Integration:
    """Save an integration's config, its secrets sealed; `connected`. One per workspace and type: a
    disconnected one is connected again (same id, fresh state); a live one is `AlreadyExists`."""
    now = now or utcnow()
    kind = kind_of(integration_type)
    if conn.execute(sa.select(workspaces.c.id).where(workspaces.c.id == workspace_id)).first() is None:
        raise NotFound(f"no workspace {workspace_id}")
    app_id = config.options.get("app_id")
    if integration_type in FLOKIT_APP_TYPES and app_id is not None:
        held = sa.select(apps.c.id).where(apps.c.id == app_id, apps.c.workspace_id == workspace_id)
        if conn.execute(held).first() is None:
            raise NotFound(f"no app {app_id} in workspace {workspace_id}")
    existing = conn.execute(
        integrations.select().where(
            integrations.c.workspace_id == workspace_id, integrations.c.type == integration_type
        )
    ).first()
    if existing is not None and existing.status != "disconnected":
        raise AlreadyExists(
            f"workspace {workspace_id} already has a {integration_type} integration ({existing.id}); "
            "disconnect it first to connect it again"
        )
    if kind.produces == "spend":
        # Spend is replaced per workspace and day (SyncTarget.replace_spend): two spend sources of
        # one workspace would erase each other's days.
        other = conn.execute(
            sa.select(integrations.c.id, integrations.c.type).where(
                integrations.c.workspace_id == workspace_id,
                integrations.c.type.in_([k.type for k in KINDS.values() if k.produces == "spend"]),
                integrations.c.type != integration_type,
                integrations.c.status != "disconnected",
            )
        ).first()
        if other is not None:
            raise Conflict(
                f"workspace {workspace_id} already takes its ad spend from {other.type} ({other.id}); "
                "a workspace has one spend source: disconnect it first"
            )
    integration_id = existing.id if existing is not None else new_id("int")
    values = {
        "status": "connected",
        "error_message": None,
        "options": config.options,
        "credentials": ROWS.seal(instance_key, integration_id, config.secrets),
        "credential_hints": {name: secret_hint(value) for name, value in config.secrets.items()},
        "cadence_hours": kind.cadence_hours,
        "sync_state": {},
        "updated_at": now,
    }
    if existing is None:
        conn.execute(
            integrations.insert().values(
                id=integration_id, workspace_id=workspace_id, type=integration_type, created_at=now, **values
            )
        )
    else:
        conn.execute(
            integrations.update().where(integrations.c.id == integration_id).values(last_synced_at=None, **values)
        )
    audit.record(
        conn,
        workspace_id=workspace_id,
        actor=actor,
        action="integration.connected",
        subject_id=integration_id,
        detail={"type": integration_type, "options": config.options},
    )
    return get_integration(conn, integration_id=integration_id, workspace_id=workspace_id)


def disconnect(conn: Connection, *, integration_id: str, actor: str, now: datetime | None = None) -> Integration:
    """`disconnected`, the credentials erased; a sync still queued fails (a running one finishes,
    and its end leaves the status alone)."""
    now = now or utcnow()
    integration = get_integration_for_operator(conn, integration_id=integration_id)
    conn.execute(
        integrations.update()
        .where(integrations.c.id == integration_id)
        .values(status="disconnected", credentials=None, credential_hints={}, error_message=None, updated_at=now)
    )
    conn.execute(
        integration_syncs.update()
        .where(integration_syncs.c.integration_id == integration_id, integration_syncs.c.status == "queued")
        .values(
            status="failed",
            active_for=None,
            finished_at=now,
            error_code="config",
            error_message="the integration was disconnected before the sync ran",
        )
    )
    audit.record(
        conn,
        workspace_id=integration.workspace_id,
        actor=actor,
        action="integration.disconnected",
        subject_id=integration_id,
        detail={"type": integration.type},
    )
    return get_integration_for_operator(conn, integration_id=integration_id)


def list_integrations(conn: Connection, *, workspace_id: str) -> list[Integration]:
    return [_integration(r) for r in ROWS.in_workspace(conn, workspace_id)]


def get_integration(conn: Connection, *, integration_id: str, workspace_id: str) -> Integration:
    """The workspace's integration; `NotFound` when there is none, or it belongs to another workspace."""
    return _integration(ROWS.one(conn, integration_id, workspace_id))


def get_integration_for_operator(conn: Connection, *, integration_id: str) -> Integration:
    """The integration, whichever workspace holds it: for the runs, the sweep, the operator's CLI
    and the notification endpoint (which learns the tenant from it). `NotFound` when there is none."""
    return _integration(ROWS.one(conn, integration_id, None))


def sync_history(conn: Connection, *, integration_id: str, limit: int = HISTORY_LIMIT) -> list[Sync]:
    return [_sync(r) for r in QUEUE.history(conn, integration_id, limit)]


def get_sync(conn: Connection, *, sync_id: str) -> Sync:
    row = QUEUE.get(conn, sync_id)
    if row is None:
        raise NotFound(f"Sync {sync_id} not found")
    return _sync(row)


def config_of(conn: Connection, *, integration_id: str, instance_key: str) -> ValidConfig:
    """The integration's config with its secrets unsealed (for a run or a `--check`)."""
    return ROWS.config(conn, integration_id, instance_key)


# --- the queue -----------------------------------------------------------------------------------


def request_sync(
    conn: Connection,
    *,
    integration_id: str,
    workspace_id: str,
    trigger: SyncTrigger = "manual",
    now: datetime | None = None,
) -> tuple[Sync, bool]:
    """Queue a sync of the workspace's integration; `(sync, True)`, or `(the pending sync, False)`
    while one is queued or running. `NotFound` when the integration is another workspace's.

    A disconnected integration cannot sync (`TransitionRefused`). Two concurrent requests race on
    the unique `active_for`: the loser reads the winner's row instead of queuing a second sync."""
    integration = get_integration(conn, integration_id=integration_id, workspace_id=workspace_id)
    return _queue_sync(conn, integration, trigger, now or utcnow())


def request_sync_for_operator(
    conn: Connection, *, integration_id: str, trigger: SyncTrigger = "manual", now: datetime | None = None
) -> tuple[Sync, bool]:
    """`request_sync` for whichever workspace holds the integration (the schedule, `flokit refresh`)."""
    integration = get_integration_for_operator(conn, integration_id=integration_id)
    return _queue_sync(conn, integration, trigger, now or utcnow())


def _queue_sync(conn: Connection, integration: Integration, trigger: SyncTrigger, now: datetime) -> tuple[Sync, bool]:
    row, created = QUEUE.insert_once(
        conn,
        Subject("Integration", integration.id, integration.status),
        {
            "id": new_id("sync"),
            "workspace_id": integration.workspace_id,
            "trigger": trigger,
            "active_for": integration.id,
            "queued_at": now,
        },
    )
    return _sync(row), created


def queued_syncs(conn: Connection) -> list[tuple[Sync, str]]:
    """Every queued sync with its integration's type, oldest first (the sensor's run requests)."""
    rows = conn.execute(
        sa.select(integration_syncs, integrations.c.type.label("integration_type"))
        .join(integrations, integrations.c.id == integration_syncs.c.integration_id)
        .where(integration_syncs.c.status == "queued")
        .order_by(integration_syncs.c.queued_at, integration_syncs.c.id)
    ).all()
    return [(_sync(r), r.integration_type) for r in rows]


def running_syncs(conn: Connection) -> list[Sync]:
    return [_sync(r) for r in QUEUE.with_status(conn, ["running"])]


def due_integrations(conn: Connection, *, now: datetime | None = None) -> list[str]:
    """Live integrations whose cadence has passed since their last sync was queued (or that never
    synced), with no sync pending: a read, so the sensor takes the write lock only when needed."""
    now = now or utcnow()
    last_queued = (
        sa.select(integration_syncs.c.integration_id, sa.func.max(integration_syncs.c.queued_at).label("at"))
        .group_by(integration_syncs.c.integration_id)
        .subquery()
    )
    rows = conn.execute(
        sa.select(integrations.c.id, integrations.c.cadence_hours, last_queued.c.at)
        .outerjoin(last_queued, last_queued.c.integration_id == integrations.c.id)
        .where(integrations.c.status.in_(["connected", "error"]))
        .order_by(integrations.c.id)
    ).all()
    return [r.id for r in rows if r.at is None or r.at + timedelta(hours=r.cadence_hours) <= now]


def enqueue_due(conn: Connection, *, now: datetime | None = None) -> list[str]:
    """Queue a `scheduled` sync for every due integration; returns the new sync ids."""
    now = now or utcnow()
    queued = []
    for integration_id in due_integrations(conn, now=now):
        sync, created = request_sync_for_operator(conn, integration_id=integration_id, trigger="scheduled", now=now)
        if created:
            queued.append(sync.id)
    return queued


def start_sync(
    conn: Connection, *, sync_id: str, run_id: str, instance_key: str, now: datetime | None = None
) -> StartedSync | None:
    """Move a queued sync to `running` (its integration to `syncing`) and hand over what the run
    needs; None when the sync is no longer queued (done, failed, or another run took it)."""
    now = now or utcnow()
    if not QUEUE.claim(conn, sync_id, run_id, now):
        return None
    sync = get_sync(conn, sync_id=sync_id)
    integration = get_integration_for_operator(conn, integration_id=sync.integration_id)
    conn.execute(
        integrations.update()
        .where(integrations.c.id == integration.id, integrations.c.status != "disconnected")
        .values(status="syncing", updated_at=now)
    )
    config = config_of(conn, integration_id=integration.id, instance_key=instance_key)
    state = conn.execute(sa.select(integrations.c.sync_state).where(integrations.c.id == integration.id)).scalar_one()
    return StartedSync(sync=sync, integration=integration, config=config, state=dict(state or {}))


def finish_success(
    conn: Connection,
    *,
    sync_id: str,
    records: int,
    earliest: datetime | None,
    state: dict[str, Any],
    now: datetime | None = None,
) -> Sync:
    """`succeeded`; the integration `connected` with `last_synced_at` = now and the connector's state."""
    now = now or utcnow()
    sync = _finish(conn, sync_id, now, status="succeeded", records_written=records, earliest_record_at=earliest)
    conn.execute(
        integrations.update()
        .where(integrations.c.id == sync.integration_id, integrations.c.status != "disconnected")
        .values(status="connected", error_message=None, last_synced_at=now, sync_state=state, updated_at=now)
    )
    return get_sync(conn, sync_id=sync_id)


def finish_failure(
    conn: Connection,
    *,
    sync_id: str,
    code: ErrorCode | None,
    message: str,
    refused: bool,
    records: int = 0,
    now: datetime | None = None,
) -> Sync:
    """`failed`. A refusal puts the integration in `error` with the message and emits one
    `integration.error`; a transient failure leaves the status as it was before the sync.
    `code` None: the run crashed for a reason of ours, not the provider's."""
    now = now or utcnow()
    message = truncate(message)
    sync = _finish(conn, sync_id, now, status="failed", records_written=records, error_code=code, error_message=message)
    integration = get_integration_for_operator(conn, integration_id=sync.integration_id)
    if integration.status == "disconnected":
        return get_sync(conn, sync_id=sync_id)
    status = after_sync(refused=refused, had_error=integration.error_message is not None)
    conn.execute(
        integrations.update()
        .where(integrations.c.id == integration.id)
        .values(
            status=status,
            error_message=message if refused else integration.error_message,
            updated_at=now,
        )
    )
    if refused:
        emit_event(
            conn,
            workspace_id=integration.workspace_id,
            event_type="integration.error",
            data=integration_sync_failed(
                integration_id=integration.id,
                integration_type=integration.type,
                sync_id=sync_id,
                error_code=code or "config",
                message=message,
            ),
            now=now,
        )
    return get_sync(conn, sync_id=sync_id)


def _finish(conn: Connection, sync_id: str, now: datetime, **values: Any) -> Sync:
    if not QUEUE.end(conn, sync_id, now, ACTIVE_SYNC_STATUSES, {"active_for": None, **values}):
        raise TransitionRefused(f"Sync {sync_id} has already ended", get_sync(conn, sync_id=sync_id).status)
    return get_sync(conn, sync_id=sync_id)
