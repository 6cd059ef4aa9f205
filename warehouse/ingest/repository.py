"""Ingest credentials, event mappings and allowlists: provisioning and the one hot-path lookup.

The hot path (`callback_context`) reads what one callback needs in one read transaction and
caches nothing, so a rotated secret, a changed mapping or a tightened allowlist applies to the
very next callback.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from transforms.event_types import CANONICAL_EVENT_TYPES
from transforms.ingest.attribution import ADAPTERS
from transforms.ingest.network import parse_network
from warehouse import audit
from warehouse.db import utcnow
from warehouse.driver import driver_statement
from warehouse.errors import AlreadyExists, InvalidIngestConfig, NotFound
from warehouse.ingest.tables import ingest_allowlist, ingest_credentials, ingest_drops, ingest_event_mappings
from warehouse.workspaces import get_workspace

# Compared against when the app token is unknown, so that an unknown token and a wrong secret
# take the same time (no oracle for which app tokens exist).
_NO_SECRET_HASH = hashlib.sha256(b"no such app token").hexdigest()


@dataclass(frozen=True)
class IssuedCredential:
    vendor: str
    app_token: str
    secret: str
    workspace_id: str


@dataclass(frozen=True)
class CallbackContext:
    """What the endpoint needs to verify and map one callback."""

    workspace_id: str | None  # None: unknown app token
    secret_hash: str
    event_type: str | None  # the mapping entry for this callback's key, if any
    allowlist: tuple[str, ...]

    def secret_matches(self, secret: str | None) -> bool:
        presented = hashlib.sha256((secret or "").encode("utf-8")).hexdigest()
        return hmac.compare_digest(presented, self.secret_hash) and self.workspace_id is not None and bool(secret)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def new_secret() -> str:
    """256 random bits, URL-safe (it travels in a query string)."""
    return secrets.token_urlsafe(32)


def new_app_token() -> str:
    return secrets.token_hex(8)


def _check_vendor(vendor: str) -> None:
    if vendor not in ADAPTERS:
        raise InvalidIngestConfig(f"unknown vendor {vendor!r}; known: {', '.join(sorted(ADAPTERS))}")


def _upsert(conn: Connection, table: sa.Table) -> Any:
    return (postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert)(table)


def create_credential(
    conn: Connection, *, workspace_id: str, vendor: str, app_token: str | None = None, actor: str = "cli"
) -> IssuedCredential:
    """Register a vendor app token for a workspace with a fresh secret (shown once).

    Raises `AlreadyExists` when the vendor already has this app token (its secret is rotated
    with `rotate_secret`, never replaced by a second registration)."""
    _check_vendor(vendor)
    get_workspace(conn, workspace_id)
    token, secret = app_token or new_app_token(), new_secret()
    try:
        conn.execute(
            ingest_credentials.insert().values(
                vendor=vendor,
                app_token=token,
                workspace_id=workspace_id,
                secret_hash=hash_secret(secret),
                created_at=utcnow(),
            )
        )
    except IntegrityError as exc:  # the (vendor, app_token) key: the caller's transaction is rolled back
        raise AlreadyExists(f"app token {token} is already registered for {vendor}") from exc
    audit.record(
        conn, workspace_id=workspace_id, actor=actor, action="ingest_credential.created", subject_id=f"{vendor}:{token}"
    )
    return IssuedCredential(vendor=vendor, app_token=token, secret=secret, workspace_id=workspace_id)


def rotate_secret(conn: Connection, *, vendor: str, app_token: str, actor: str = "cli") -> IssuedCredential:
    """A new secret in one statement: the old one fails from the next callback on."""
    secret = new_secret()
    row = conn.execute(
        ingest_credentials.update()
        .where(ingest_credentials.c.vendor == vendor, ingest_credentials.c.app_token == app_token)
        .values(secret_hash=hash_secret(secret), rotated_at=utcnow())
        .returning(ingest_credentials.c.workspace_id)
    ).first()
    if row is None:
        raise NotFound(f"{vendor}:{app_token}")
    audit.record(
        conn,
        workspace_id=row.workspace_id,
        actor=actor,
        action="ingest_credential.rotated",
        subject_id=f"{vendor}:{app_token}",
    )
    return IssuedCredential(vendor=vendor, app_token=app_token, secret=secret, workspace_id=row.workspace_id)


def set_mapping(
    conn: Connection, *, workspace_id: str, vendor: str, token: str, event_type: str, actor: str = "cli"
) -> None:
    """Map a vendor token (or `activity_kind:<kind>`) to a canonical event type; replaces any old one."""
    _check_vendor(vendor)
    if event_type not in CANONICAL_EVENT_TYPES:
        raise InvalidIngestConfig(
            f"unknown event type {event_type!r}; canonical types: {', '.join(sorted(CANONICAL_EVENT_TYPES))}"
        )
    token = token.strip()
    if not token:
        raise InvalidIngestConfig("the vendor token must not be empty")
    get_workspace(conn, workspace_id)
    now = utcnow()
    statement = _upsert(conn, ingest_event_mappings).values(
        workspace_id=workspace_id, vendor=vendor, vendor_token=token, event_type=event_type, updated_at=now
    )
    conn.execute(
        statement.on_conflict_do_update(
            index_elements=["workspace_id", "vendor", "vendor_token"],
            set_={"event_type": event_type, "updated_at": now},
        )
    )
    audit.record(
        conn,
        workspace_id=workspace_id,
        actor=actor,
        action="ingest_mapping.set",
        subject_id=f"{vendor}:{token}",
        detail={"event_type": event_type},
    )


def mappings(conn: Connection, *, workspace_id: str, vendor: str) -> dict[str, str]:
    """A workspace's whole mapping for a vendor (batch re-normalization, listings)."""
    rows = conn.execute(
        sa.select(ingest_event_mappings.c.vendor_token, ingest_event_mappings.c.event_type).where(
            ingest_event_mappings.c.workspace_id == workspace_id, ingest_event_mappings.c.vendor == vendor
        )
    ).all()
    return dict(rows)


def allow(conn: Connection, *, vendor: str, cidr: str) -> str:
    """Add a network to a vendor's allowlist (idempotent). Returns its canonical form."""
    _check_vendor(vendor)
    try:
        network = str(parse_network(cidr))
    except ValueError as exc:
        raise InvalidIngestConfig(str(exc)) from exc
    conn.execute(
        _upsert(conn, ingest_allowlist)
        .values(vendor=vendor, cidr=network, created_at=utcnow())
        .on_conflict_do_nothing(index_elements=["vendor", "cidr"])
    )
    return network


def disallow(conn: Connection, *, vendor: str, cidr: str) -> bool:
    try:
        network = str(parse_network(cidr))
    except ValueError as exc:
        raise InvalidIngestConfig(str(exc)) from exc
    deleted = conn.execute(
        ingest_allowlist.delete().where(ingest_allowlist.c.vendor == vendor, ingest_allowlist.c.cidr == network)
    )
    return deleted.rowcount > 0


def allowlist(conn: Connection, *, vendor: str) -> list[str]:
    rows = conn.execute(
        sa.select(ingest_allowlist.c.cidr).where(ingest_allowlist.c.vendor == vendor).order_by(ingest_allowlist.c.cidr)
    )
    return list(rows.scalars())


# The hot path's one statement: the credential joined with this callback's mapping entry, then
# the vendor's allowlist rows, in one round trip. Built once with bound parameters so SQLAlchemy
# compiles it once per process (building the expression per call cost more than running it).
_CONTEXT = sa.union_all(
    sa.select(
        sa.literal("credential").label("kind"),
        ingest_credentials.c.workspace_id.label("a"),
        ingest_credentials.c.secret_hash.label("b"),
        ingest_event_mappings.c.event_type.label("c"),
    )
    .select_from(
        ingest_credentials.outerjoin(
            ingest_event_mappings,
            sa.and_(
                ingest_event_mappings.c.workspace_id == ingest_credentials.c.workspace_id,
                ingest_event_mappings.c.vendor == ingest_credentials.c.vendor,
                ingest_event_mappings.c.vendor_token == sa.bindparam("key"),
            ),
        )
    )
    .where(
        ingest_credentials.c.vendor == sa.bindparam("vendor"),
        ingest_credentials.c.app_token == sa.bindparam("app_token"),
    ),
    sa.select(
        sa.literal("allow").label("kind"),
        ingest_allowlist.c.cidr.label("a"),
        sa.null().label("b"),
        sa.null().label("c"),
    ).where(ingest_allowlist.c.vendor == sa.bindparam("vendor")),
)


def callback_context(conn: Connection, *, vendor: str, app_token: str | None, key: str | None) -> CallbackContext:
    """Credential, the mapping entry for `key` and the vendor's allowlist, in one query."""
    # (kind, a, b, c) string tuples need no result processing, so the driver path is safe here.
    rows = driver_statement(conn, "ingest_callback_context", lambda: _CONTEXT).execute(
        conn, {"vendor": vendor, "app_token": app_token or "", "key": key or ""}
    )
    credential = next((r for r in rows if r[0] == "credential"), None) if app_token else None
    networks = tuple(r[1] for r in rows if r[0] == "allow")
    if credential is None:
        return CallbackContext(workspace_id=None, secret_hash=_NO_SECRET_HASH, event_type=None, allowlist=networks)
    return CallbackContext(
        workspace_id=credential[1], secret_hash=credential[2], event_type=credential[3], allowlist=networks
    )


def _drop_upsert(dialect: str) -> Any:
    insert = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(ingest_drops).values(
        workspace_id=sa.bindparam("workspace_id"),
        vendor=sa.bindparam("vendor"),
        reason=sa.bindparam("reason"),
        day=sa.bindparam("day", type_=sa.Date()),
        count=sa.bindparam("one", type_=sa.BigInteger()),
        last_dropped_at=sa.bindparam("at", type_=ingest_drops.c.last_dropped_at.type),
    )
    return insert.on_conflict_do_update(
        index_elements=["workspace_id", "vendor", "reason", "day"],
        set_={
            "count": ingest_drops.c.count + insert.excluded.count,
            "last_dropped_at": insert.excluded.last_dropped_at,
        },
    )


def record_drop(conn: Connection, *, workspace_id: str, vendor: str, reason: str, at: datetime) -> None:
    """Count one dropped callback (one statement, on the callback's own connection: the hot
    path's driver connection, so it commits with the callback's transaction on SQLite and on
    its own, atomically, on PostgreSQL's autocommit connection)."""
    statement = driver_statement(conn, "ingest_record_drop", lambda: _drop_upsert(conn.dialect.name))
    statement.execute(
        conn, {"workspace_id": workspace_id, "vendor": vendor, "reason": reason, "day": at.date(), "one": 1, "at": at}
    )


@dataclass(frozen=True)
class DropCount:
    workspace_id: str
    vendor: str
    reason: str
    day: date
    count: int
    last_dropped_at: datetime


def drops(conn: Connection, *, workspace_id: str, since: date | None = None) -> list[DropCount]:
    """The workspace's dropped callbacks per vendor, reason and day, newest day first."""
    return _drops(conn, sa.select(ingest_drops).where(ingest_drops.c.workspace_id == workspace_id), since)


def drops_for_operator(conn: Connection, *, since: date | None = None) -> list[DropCount]:
    """Dropped callbacks of every workspace (`flokit ingest drops` without --workspace)."""
    return _drops(conn, sa.select(ingest_drops), since)


def _drops(conn: Connection, query: sa.Select, since: date | None) -> list[DropCount]:
    if since is not None:
        query = query.where(ingest_drops.c.day >= since)
    rows = conn.execute(
        query.order_by(
            ingest_drops.c.day.desc(), ingest_drops.c.workspace_id, ingest_drops.c.vendor, ingest_drops.c.reason
        )
    )
    return [DropCount(**row._mapping) for row in rows]
