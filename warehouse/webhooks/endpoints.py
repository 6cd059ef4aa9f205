"""Webhook endpoints and their signing secrets (the operator's side: add, list, enable,
disable, rotate).

Signing secrets are kept sealed with the instance key (`transforms.sealing`, purpose
"webhook-signing-secrets", the endpoint id as context, as provider credentials are sealed): HMAC
signing needs the secret itself, so it cannot be hashed like an API key, but whoever reads the
database or a backup must not be able to forge our webhooks. The plaintext is returned once, on
creation and on rotation, to show the operator. Rows written before secrets were sealed hold the
plaintext (`whsec_...`): `seal_plaintext_secrets` seals them (`flokit db upgrade` and `flokit up`
run it: a migration cannot, as the instance key is not the migration's to read), and until then
such a row is read as it is, so deliveries keep their signatures across the upgrade.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from transforms import sealing
from transforms.ids import new_id
from transforms.webhooks.envelope import check_event_type
from transforms.webhooks.signing import SECRET_PREFIX, new_signing_secret
from transforms.webhooks.urls import Resolver, check_form, public_addresses
from warehouse import audit
from warehouse.db import utcnow
from warehouse.errors import NotFound
from warehouse.webhooks.tables import webhook_deliveries, webhook_endpoints, webhook_secrets
from warehouse.webhooks.wakeup import wake_drains
from warehouse.workspaces import get_workspace

# Spec: "for 24 hours both the active and retiring secrets sign".
ROTATION_OVERLAP = timedelta(hours=24)
SEAL_PURPOSE = "webhook-signing-secrets"


def seal_secret(instance_key: str, endpoint_id: str, secret: str) -> str:
    """The stored form of an endpoint's signing secret: sealed, bound to the endpoint."""
    return sealing.seal(instance_key, SEAL_PURPOSE, secret.encode(), context=endpoint_id)


def open_secret(instance_key: str, endpoint_id: str, stored: str) -> str:
    """The signing secret of a stored value (a plaintext row from before sealing as it is);
    `sealing.SealError` under another instance key or endpoint."""
    if stored.startswith(SECRET_PREFIX):
        return stored
    return sealing.unseal(instance_key, SEAL_PURPOSE, stored, context=endpoint_id).decode()


def seal_plaintext_secrets(conn: Connection, *, instance_key: str) -> int:
    """Seal every signing secret still stored in plaintext; how many. Idempotent."""
    rows = conn.execute(
        sa.select(webhook_secrets.c.id, webhook_secrets.c.endpoint_id, webhook_secrets.c.secret).where(
            webhook_secrets.c.secret.startswith(SECRET_PREFIX, autoescape=True)
        )
    ).all()
    for r in rows:
        conn.execute(
            webhook_secrets.update()
            .where(webhook_secrets.c.id == r.id, webhook_secrets.c.secret == r.secret)
            .values(secret=seal_secret(instance_key, r.endpoint_id, r.secret))
        )
    return len(rows)


@dataclass(frozen=True)
class Endpoint:
    id: str
    workspace_id: str
    url: str
    events: tuple[str, ...]
    status: str
    standard_webhooks: bool
    consecutive_failures: int
    created_at: datetime
    disabled_at: datetime | None
    deleted_at: datetime | None = None


def _endpoint(row: sa.Row) -> Endpoint:
    m = dict(row._mapping)
    m["events"] = tuple(m["events"])
    return Endpoint(**m)


def parse_events(events: Iterable[str]) -> tuple[str, ...]:
    chosen = tuple(dict.fromkeys(e.strip() for e in events if e.strip()))
    if not chosen:
        raise ValueError("choose at least one event type")
    for e in chosen:
        check_event_type(e)
    return chosen


def create_endpoint(
    conn: Connection,
    *,
    workspace_id: str,
    url: str,
    events: Sequence[str],
    allow_private: bool,
    instance_key: str,
    standard_webhooks: bool = False,
    actor: str = "cli",
    resolver: Resolver | None = None,
) -> tuple[Endpoint, str]:
    """A new enabled endpoint and its first signing secret (returned once, to show the operator;
    stored sealed under `instance_key`).

    The URL's form is checked here; its addresses too when a `resolver` is given (the CLI passes
    `clients.dns.system_resolver`: warehouse makes no lookups itself). The sender checks the
    addresses again at every connection (`clients.transport`), so DNS changing later is covered."""
    get_workspace(conn, workspace_id)
    chosen = parse_events(events)
    host, port = check_form(url, allow_private=allow_private)
    if resolver is not None and not allow_private:
        public_addresses(host, port, resolver)
    now = utcnow()
    endpoint_id, secret = new_id("whe"), new_signing_secret()
    conn.execute(
        webhook_endpoints.insert().values(
            id=endpoint_id,
            workspace_id=workspace_id,
            url=url,
            events=list(chosen),
            status="enabled",
            standard_webhooks=standard_webhooks,
            consecutive_failures=0,
            created_at=now,
        )
    )
    sealed = seal_secret(instance_key, endpoint_id, secret)
    conn.execute(
        webhook_secrets.insert().values(endpoint_id=endpoint_id, secret=sealed, status="active", created_at=now)
    )
    audit.record(
        conn,
        workspace_id=workspace_id,
        actor=actor,
        action="webhook_endpoint.created",
        subject_id=endpoint_id,
        detail={"url": url, "events": list(chosen), "standard_webhooks": standard_webhooks},
    )
    return get_endpoint(conn, workspace_id=workspace_id, endpoint_id=endpoint_id), secret


def get_endpoint(conn: Connection, *, workspace_id: str, endpoint_id: str) -> Endpoint:
    """The workspace's endpoint; another workspace's is NotFound, as an unknown or deleted one."""
    return _one(
        conn, endpoint_id, webhook_endpoints.c.workspace_id == workspace_id, webhook_endpoints.c.deleted_at.is_(None)
    )


def endpoint_for_operator(conn: Connection, endpoint_id: str) -> Endpoint:
    """Any workspace's endpoint, for the operator's commands (`flokit admin webhooks`), which
    administer every workspace (a deleted one too: its history stays readable). Never called with
    an id a request sent: that is `get_endpoint`."""
    return _one(conn, endpoint_id)


def _one(conn: Connection, endpoint_id: str, *where: sa.ColumnElement[bool]) -> Endpoint:
    row = conn.execute(webhook_endpoints.select().where(webhook_endpoints.c.id == endpoint_id, *where)).first()
    if row is None:
        raise NotFound(f"No webhook endpoint {endpoint_id}")
    return _endpoint(row)


def list_endpoints(conn: Connection, workspace_id: str) -> list[Endpoint]:
    rows = conn.execute(
        webhook_endpoints.select()
        .where(webhook_endpoints.c.workspace_id == workspace_id, webhook_endpoints.c.deleted_at.is_(None))
        .order_by(webhook_endpoints.c.created_at, webhook_endpoints.c.id)
    )
    return [_endpoint(r) for r in rows]


def set_enabled(conn: Connection, *, endpoint_id: str, enabled: bool, actor: str = "cli") -> Endpoint:
    """Enable (failure count back to 0, paused deliveries resume) or disable an endpoint. A
    deleted endpoint is NotFound: nothing is sent to it again."""
    values = (
        {"status": "enabled", "consecutive_failures": 0, "disabled_at": None}
        if enabled
        else {"status": "disabled", "disabled_at": utcnow()}
    )
    row = conn.execute(
        webhook_endpoints.update()
        .where(webhook_endpoints.c.id == endpoint_id, webhook_endpoints.c.deleted_at.is_(None))
        .values(**values)
        .returning(webhook_endpoints.c.workspace_id)
    ).first()
    if row is None:
        raise NotFound(f"No webhook endpoint {endpoint_id}")
    if enabled:
        wake_drains(conn)  # its waiting deliveries whose time has come are due now
    action = "webhook_endpoint.enabled" if enabled else "webhook_endpoint.disabled"
    audit.record(conn, workspace_id=row.workspace_id, actor=actor, action=action, subject_id=endpoint_id)
    return get_endpoint(conn, workspace_id=row.workspace_id, endpoint_id=endpoint_id)


def rotate_secret(
    conn: Connection, *, endpoint_id: str, instance_key: str, now: datetime | None = None, actor: str = "cli"
) -> tuple[str, datetime]:
    """New active secret (returned once, stored sealed); the previous active one signs alongside it
    until the returned expiry.

    A secret still retiring from an earlier rotation is dropped at once, so at most two secrets
    ever sign (the verifier accepts 1 or 2)."""
    endpoint = endpoint_for_operator(conn, endpoint_id)
    now = now or utcnow()
    expires = now + ROTATION_OVERLAP
    conn.execute(
        webhook_secrets.delete().where(
            webhook_secrets.c.endpoint_id == endpoint_id, webhook_secrets.c.status == "retiring"
        )
    )
    conn.execute(
        webhook_secrets.update()
        .where(webhook_secrets.c.endpoint_id == endpoint_id, webhook_secrets.c.status == "active")
        .values(status="retiring", expires_at=expires)
    )
    secret = new_signing_secret()
    sealed = seal_secret(instance_key, endpoint_id, secret)
    conn.execute(
        webhook_secrets.insert().values(endpoint_id=endpoint_id, secret=sealed, status="active", created_at=now)
    )
    audit.record(
        conn,
        workspace_id=endpoint.workspace_id,
        actor=actor,
        action="webhook_endpoint.secret_rotated",
        subject_id=endpoint_id,
        detail={"previous_secret_expires_at": expires.isoformat()},
    )
    return secret, expires


def signing_secrets(
    conn: Connection, endpoint_ids: Iterable[str], now: datetime, *, instance_key: str
) -> dict[str, list[str]]:
    """Per endpoint, the secrets that sign at `now`, unsealed: the active one first, then a
    retiring one whose overlap has not expired. A secret that does not open (another instance
    key) raises `sealing.SealError`: nothing is sent unsigned or signed wrongly."""
    ids = list(set(endpoint_ids))
    if not ids:
        return {}
    rows = conn.execute(
        sa.select(webhook_secrets.c.endpoint_id, webhook_secrets.c.secret)
        .where(
            webhook_secrets.c.endpoint_id.in_(ids),
            sa.or_(webhook_secrets.c.status == "active", webhook_secrets.c.expires_at > now),
        )
        .order_by(webhook_secrets.c.endpoint_id, webhook_secrets.c.status, webhook_secrets.c.id.desc())
    ).all()
    out: dict[str, list[str]] = {}
    for r in rows:  # 'active' sorts before 'retiring'
        out.setdefault(r.endpoint_id, []).append(open_secret(instance_key, r.endpoint_id, r.secret))
    return out


def update_endpoint(
    conn: Connection,
    *,
    workspace_id: str,
    endpoint_id: str,
    url: str | None = None,
    events: Sequence[str] | None = None,
    standard_webhooks: bool | None = None,
    enabled: bool | None = None,
    allow_private: bool,
    actor: str,
    resolver: Resolver | None = None,
) -> Endpoint:
    """Change what is given (PATCH /v1/webhooks/endpoints/{id}); NotFound for another workspace's.

    The URL is checked as `create_endpoint` checks it. `enabled=True` is `set_enabled` (failure
    count back to 0, as `flokit admin webhooks enable`, even when already enabled);
    `enabled=False` disables an enabled endpoint (an already disabled one keeps its reason and
    time). The other changes are audited together as `webhook_endpoint.updated`, naming the new
    values; deliveries already queued are sent to the new URL with the new headers."""
    endpoint = get_endpoint(conn, workspace_id=workspace_id, endpoint_id=endpoint_id)
    changes: dict[str, object] = {}
    if url is not None and url != endpoint.url:
        host, port = check_form(url, allow_private=allow_private)
        if resolver is not None and not allow_private:
            public_addresses(host, port, resolver)
        changes["url"] = url
    if events is not None and (chosen := parse_events(events)) != endpoint.events:
        changes["events"] = list(chosen)
    if standard_webhooks is not None and standard_webhooks != endpoint.standard_webhooks:
        changes["standard_webhooks"] = standard_webhooks
    if changes:
        conn.execute(webhook_endpoints.update().where(webhook_endpoints.c.id == endpoint_id).values(**changes))
        audit.record(
            conn,
            workspace_id=workspace_id,
            actor=actor,
            action="webhook_endpoint.updated",
            subject_id=endpoint_id,
            detail=changes,
        )
    if enabled or (enabled is False and endpoint.status == "enabled"):
        set_enabled(conn, endpoint_id=endpoint_id, enabled=enabled, actor=actor)
    return get_endpoint(conn, workspace_id=workspace_id, endpoint_id=endpoint_id)


def delete_endpoint(conn: Connection, *, workspace_id: str, endpoint_id: str, now: datetime, actor: str) -> int:
    """Delete the workspace's endpoint for its clients (DELETE /v1/webhooks/endpoints/{id}); how
    many queued deliveries were stopped.

    The rows stay: the audit log, the delivery history and its attempts refer to them, and the
    operator's commands still read them. What changes: `deleted_at` is set (v1, the dashboard and
    the endpoint lists no longer see it; enabling it is NotFound), it is disabled (no drain claims
    it again), its subscriptions are emptied (the outbox queues nothing new for it; the audit
    entry keeps the list), and its deliveries still waiting (pending, or leased by a run that
    died) are failed for good with the error "endpoint deleted". A send already under way when
    the endpoint is deleted completes and is recorded; nothing follows it."""
    endpoint = get_endpoint(conn, workspace_id=workspace_id, endpoint_id=endpoint_id)
    e, d = webhook_endpoints.c, webhook_deliveries.c
    conn.execute(
        webhook_endpoints.update()
        .where(e.id == endpoint_id)
        .values(deleted_at=now, status="disabled", disabled_at=sa.func.coalesce(e.disabled_at, now), events=[])
    )
    stopped = conn.execute(
        webhook_deliveries.update()
        .where(
            d.endpoint_id == endpoint_id,
            sa.or_(d.status == "pending", sa.and_(d.status == "delivering", d.lease_until < now)),
        )
        .values(
            status="failed",
            next_attempt_at=None,
            lease_until=None,
            lease_token=None,
            last_error="endpoint deleted",
            completed_at=now,
            resend_from=None,
        )
    ).rowcount
    audit.record(
        conn,
        workspace_id=workspace_id,
        actor=actor,
        action="webhook_endpoint.deleted",
        subject_id=endpoint_id,
        detail={"url": endpoint.url, "events": list(endpoint.events), "stopped_deliveries": stopped},
    )
    return stopped
