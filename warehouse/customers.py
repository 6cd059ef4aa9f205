"""Customers (issue 34, preview): what FloKit knows of one user, the search by any id a support
agent holds, and promotional grants.

Where each part is read (`transforms.customers` decides what the values are):
- purchases and entitlements: `entitlement_grants`, the ledger, read at request time;
- provider notifications: `store_notifications` found by the user their effects were applied to
  (`user_id`, set when applied, migration 0200): a notification applied a second ago is there;
- canonical events: the database's `landed_events` rows not yet in the lake (`in_lake` false: a
  range of their `(in_lake, day)` index, the last hours of events) and the lake's
  `canonical_events` for the rest, filtered on the user. Ingest's table gets no user index: each
  index is one more b-tree per callback on the hottest write path (warehouse/events/tables.py);
- FloKit's own actions: the audit log's entries about the user's grants (`subject_id`).

Promotional grants are ledger rows of source and channel `promotional` (their `store_key` is their
own id), so every entitlement read answers them like a store's purchase; writing one notifies the
entitlement caches (`cache.notify`) in the same transaction and audits it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import polars as pl
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from transforms.customers import MatchedOn, build_customer, matched_on
from transforms.entitlements.facts import PROMOTIONAL
from transforms.ids import new_id
from transforms.timefmt import iso_z
from warehouse import audit, fx
from warehouse.db import utcnow
from warehouse.entitlements import cache
from warehouse.entitlements.tables import entitlement_grants as g
from warehouse.entitlements.tables import store_notifications as n
from warehouse.errors import Conflict, Invalid, NotFound
from warehouse.events.tables import landed_events as le
from warehouse.lake import Lake
from warehouse.paths import DataPaths
from warehouse.reports.report_lake import CANONICAL_EVENTS, scan_days
from warehouse.tables import apps, audit_log, workspaces

GRANTED = "customer.entitlement_granted"
ENDED = "customer.entitlement_ended"
SEARCH_LIMIT = 50  # hits per search: an exact id names few customers; a page more is a bad query


@dataclass(frozen=True)
class Event:
    event_id: str
    event_type: str
    occurred_at: datetime
    platform: str | None
    country: str | None
    source: str
    properties: dict[str, Any]


@dataclass(frozen=True)
class Hit:
    user_id: str
    app_id: str
    matched_on: MatchedOn


def resolve_app(conn: Connection, *, workspace_id: str, app_id: str | None) -> str:
    """The workspace's app the request is about: the one named (NotFound if it is not the
    workspace's), else its only app (Invalid when it has several: the caller must say which)."""
    query = sa.select(apps.c.id).where(apps.c.workspace_id == workspace_id, apps.c.revoked_at.is_(None))
    if app_id is not None:
        found = conn.execute(query.where(apps.c.id == app_id)).scalar()
        if found is None:
            raise NotFound(f"No app {app_id} in this workspace")
        return str(found)
    ids = list(conn.execute(query.order_by(apps.c.id).limit(2)).scalars())
    if not ids:
        raise NotFound("This workspace has no app")
    if len(ids) > 1:
        raise Invalid("app_id is required: this workspace has several apps")
    return str(ids[0])


def grant_promotional(
    conn: Connection,
    *,
    workspace_id: str,
    app_id: str,
    user_id: str,
    product_id: str,
    ends_at: datetime,
    reason: str,
    actor: str,
) -> Row[Any]:
    """A promotional grant of `product_id` to the user until `ends_at`, audited; the user need
    not be known yet (support pre-grants)."""
    now = utcnow()
    grant_id = new_id("grt")
    conn.execute(
        g.insert().values(
            id=grant_id, workspace_id=workspace_id, app_id=app_id, source=PROMOTIONAL, store_key=grant_id,
            user_id=user_id, product_id=product_id, kind="subscription", channel=PROMOTIONAL,
            environment="production", expires_at=ends_at, grace_ends_at=None, access_ends_at=ends_at,
            in_trial=False, auto_renew=False, stated_at=now, linked_at=now, created_at=now, updated_at=now,
        )
    )  # fmt: skip
    cache.notify(conn, app_id, user_id)
    audit.record(conn, workspace_id=workspace_id, actor=actor, action=GRANTED, subject_id=grant_id,
                 detail={"user_id": user_id, "app_id": app_id, "product_id": product_id,
                         "expires_at": iso_z(ends_at), "reason": reason})  # fmt: skip
    return conn.execute(sa.select(g).where(g.c.id == grant_id)).one()


def end_promotional(
    conn: Connection, *, workspace_id: str, user_id: str, grant_id: str, reason: str | None, actor: str
) -> Row[Any]:
    """End the user's promotional grant now (its expiry and access end become now, and it reads
    revoked), audited. A store's purchase is a `Conflict`: only its store ends it. A grant ended
    before is answered as it is, unchanged and not audited again."""
    row = conn.execute(
        sa.select(g)
        .where(g.c.id == grant_id, g.c.workspace_id == workspace_id, g.c.user_id == user_id)
        .with_for_update()
    ).first()
    if row is None:
        raise NotFound(f"No grant {grant_id} for this customer")
    if row.source != PROMOTIONAL:
        raise Conflict(f"Grant {grant_id} is a {row.source} purchase: only its store can end it")
    now = utcnow()
    if row.revoked_at is not None or (row.access_ends_at is not None and row.access_ends_at <= now):
        return row
    conn.execute(
        sa.update(g)
        .where(g.c.id == grant_id)
        .values(
            expires_at=now,
            access_ends_at=now,
            revoked_at=now,
            revocation_reason="ended_early",
            stated_at=now,
            updated_at=now,
        )
    )
    cache.notify(conn, row.app_id, user_id)
    detail = {"user_id": user_id, "app_id": row.app_id, "product_id": row.product_id, "reason": reason}
    audit.record(conn, workspace_id=workspace_id, actor=actor, action=ENDED, subject_id=grant_id, detail=detail)
    return conn.execute(sa.select(g).where(g.c.id == grant_id)).one()


def grants(conn: Connection, *, app_id: str, user_id: str) -> list[Row[Any]]:
    """The user's purchases and promotional grants in the app, newest statement first."""
    return list(
        conn.execute(
            sa.select(g).where(g.c.app_id == app_id, g.c.user_id == user_id).order_by(g.c.stated_at.desc(), g.c.id)
        )
    )


def notifications(conn: Connection, *, workspace_id: str, user_id: str) -> list[Row[Any]]:
    """The provider notifications applied to the user's purchases (no body: the timeline shows
    their provider, status and error)."""
    return list(
        conn.execute(
            sa.select(n.c.id, n.c.provider, n.c.status, n.c.error, n.c.received_at, n.c.applied_at).where(
                n.c.workspace_id == workspace_id, n.c.user_id == user_id
            )
        )
    )


def actions(conn: Connection, *, workspace_id: str, grant_ids: Iterable[str]) -> list[Row[Any]]:
    """The audit log's entries about these grants (FloKit's own actions on the customer)."""
    ids = list(grant_ids)
    if not ids:
        return []
    return list(
        conn.execute(
            sa.select(audit_log).where(audit_log.c.workspace_id == workspace_id, audit_log.c.subject_id.in_(ids))
        )
    )


def events(conn: Connection, lake: Lake, *, workspace_id: str, user_id: str) -> list[Event]:
    """The user's canonical events: the lake's, and the landed rows the lake does not have yet
    (an event is in one or the other: `in_lake` is set when its partition is written). An event
    in both for a moment (the partition written, the mark not yet committed) is kept once."""
    pending = conn.execute(
        sa.select(
            le.c.event_id, le.c.event_type, le.c.occurred_at, le.c.platform, le.c.country, le.c.source, le.c.properties
        ).where(le.c.in_lake == sa.false(), le.c.workspace_id == workspace_id, le.c.user_id == user_id)
    )
    found: dict[str, Event] = {}
    for r in pending:
        props = r.properties if isinstance(r.properties, dict) else json.loads(r.properties or "{}")
        found[r.event_id] = Event(r.event_id, r.event_type, r.occurred_at, r.platform, r.country, r.source, props)
    lake_rows = (
        scan_days(lake, CANONICAL_EVENTS)
        .filter((pl.col("user_id") == user_id) & (pl.col("workspace_id") == workspace_id))
        .select("event_id", "event_type", "occurred_at", "platform", "country", "source", "properties")
        .collect()
    )
    for row in lake_rows.iter_rows(named=True):
        if row["event_id"] not in found:
            props = json.loads(row["properties"] or "{}")
            found[row["event_id"]] = Event(row["event_id"], row["event_type"], row["occurred_at"], row["platform"],
                                           row["country"], row["source"], props)  # fmt: skip
    return sorted(found.values(), key=lambda e: (e.occurred_at, e.event_id))


def customer(
    conn: Connection,
    paths: DataPaths,
    *,
    workspace_id: str,
    app_id: str,
    user_id: str,
    now: datetime,
    timeline_before: datetime | None,
    timeline_limit: int,
) -> dict[str, Any] | None:
    """Everything the customer page shows (`transforms.customers.build_customer`'s values), or
    None when FloKit has never heard of the user in the app. The one read behind both surfaces,
    `GET /v1/customers/{user_id}` and the dashboard's customer page, so they cannot disagree."""
    found = grants(conn, app_id=app_id, user_id=user_id)
    currency = conn.execute(
        sa.select(workspaces.c.reporting_currency).where(workspaces.c.id == workspace_id)
    ).scalar_one()
    return build_customer(
        user_id=user_id,
        app_id=app_id,
        grants=found,
        events=events(conn, paths.lake(), workspace_id=workspace_id, user_id=user_id),
        notifications=notifications(conn, workspace_id=workspace_id, user_id=user_id),
        actions=actions(conn, workspace_id=workspace_id, grant_ids=[gr.id for gr in found]),
        reporting_currency=str(currency),
        rates=fx.load_rates(paths),
        now=now,
        timeline_before=timeline_before,
        timeline_limit=timeline_limit,
    )


# The grant columns a search matches exactly, each with its own index (migration 0200), and the
# user id with the `(app_id, user_id)` one.
_SEARCHED = ("user_id", "store_key", "current_token", "transaction_id", "customer_id")


def search(conn: Connection, *, workspace_id: str, query: str) -> list[Hit]:
    """Customers of the workspace's apps with a grant whose user id, purchase key, current
    token, latest transaction id or customer id is exactly `query`: one indexed probe per column
    (a UNION of exact matches), at most `SEARCH_LIMIT` hits, user id matches first."""
    app_ids = sa.select(apps.c.id).where(apps.c.workspace_id == workspace_id).scalar_subquery()
    selects = [
        sa.select(g.c.user_id, g.c.app_id, g.c.source, sa.literal(i).label("rank"), sa.literal(column).label("col"))
        .where(g.c[column] == query, g.c.app_id.in_(app_ids), g.c.user_id.is_not(None))
        .limit(SEARCH_LIMIT)
        for i, column in enumerate(_SEARCHED)
    ]
    rows = conn.execute(sa.union_all(*[s.subquery().select() for s in selects]))
    hits: dict[tuple[str, str], Hit] = {}
    for r in sorted(rows, key=lambda r: (r.rank, r.app_id, r.user_id)):
        key = (r.user_id, r.app_id)
        if key not in hits and len(hits) < SEARCH_LIMIT:
            hits[key] = Hit(r.user_id, r.app_id, matched_on(r.col, r.source))
    return list(hits.values())
