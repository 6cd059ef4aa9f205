"""The entitlement ledger: facts applied to grants, and the answer to "is this user active now?".

Two ways in, with different rights (issue 17, "Receipts belong to their buyer"):
- `apply_receipt`: the app names a user (`x-user-id`) and shows a verified purchase. The
  purchase is linked to that user if it is nobody's yet; one already linked to another user is
  refused (`NotTheBuyer`) and changes nothing, so a receipt can neither grant one paying user's
  purchase to others nor, verifying as lapsed, switch that user's access off. Where the store
  carries the buyer's token and the app set it, it must name this user.
- `apply_statement`: a store or provider states what happened to a purchase (a notification or
  a sync). The grant's state follows; its user changes only when the statement is a transfer,
  and a purchase nobody claimed yet is linked to the user the source names (`user_hint`), if any.

State follows the latest statement (`stated_at`): a notification delivered late never undoes a
newer one. A statement's time counts only up to a few minutes after the server's clock
(`facts.bounded`), for every source: one dated in the future would otherwise outrank every
genuine statement until then. The store's current token of the purchase (`current_token`) follows the same rule, so
a late statement read from an older token never sends the sync back to it; so do the latest paid
transaction's price (`price_amount`, `price_currency`, `priced_at`) and the billing period: a
newer statement that names none (a trial, a cancellation, a void) keeps what the ledger held. Concurrent
applications of one purchase are serialized on its row (INSERT ... ON CONFLICT DO NOTHING, then
the row locked), so two receipts racing for one purchase link it once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Row

from transforms.entitlements.facts import StoreFact, bounded
from transforms.entitlements.identity import token_names_user
from transforms.ids import new_id
from warehouse.db import Database, utcnow
from warehouse.driver import driver_statement
from warehouse.entitlements import cache
from warehouse.entitlements.tables import entitlement_grants as g
from warehouse.errors import NotTheBuyer
from warehouse.subscriptions import stock
from warehouse.tables import apps

SOURCE_NONE = "none"  # the entitlement answer's `source` when no purchase was ever linked

_STATE = (
    "product_id", "kind", "channel", "environment", "expires_at", "grace_ends_at", "access_ends_at", "revoked_at",
    "revocation_reason", "in_trial", "auto_renew", "transaction_id", "stated_at",
)  # fmt: skip


@dataclass(frozen=True)
class Applied:
    grant_id: str
    user_id: str | None  # who the purchase is linked to after this application
    previous_user_id: str | None  # who it was linked to before (a transfer changes it)
    created: bool
    state_changed: bool  # the fact was newer than what the ledger held


@dataclass(frozen=True)
class Entitlement:
    active: bool
    source: str  # the channel of the grant that decides (`iap`, `web`, `promotional`), else `none`


def _state_values(fact: StoreFact) -> dict[str, Any]:
    return {
        "product_id": fact.product_id,
        "kind": fact.kind,
        "channel": fact.channel,
        "environment": fact.environment,
        "expires_at": fact.expires_at,
        "grace_ends_at": fact.grace_ends_at,
        "access_ends_at": fact.access_ends_at,
        "revoked_at": fact.revoked_at,
        "revocation_reason": fact.revocation_reason,
        "in_trial": fact.in_trial,
        "auto_renew": fact.auto_renew,
        "transaction_id": fact.transaction_id,
        "stated_at": fact.stated_at,
    }


def _price_values(fact: StoreFact) -> dict[str, Any]:
    """The price columns a statement names (empty: it names no price, the ledger's stays)."""
    values: dict[str, Any] = {}
    if fact.price_amount is not None:
        values |= {
            "price_amount": fact.price_amount,
            "price_currency": fact.price_currency,
            "priced_at": fact.priced_at,
        }
    if fact.billing_period is not None:
        values["billing_period"] = fact.billing_period
    return values


def _claim(
    conn: Connection, *, workspace_id: str, app_id: str, fact: StoreFact, user_id: str | None
) -> tuple[Row[Any], bool]:
    """The purchase's row, created from `fact` (linked to `user_id`) if it did not exist (then
    True), and locked for this transaction."""
    now = utcnow()
    values = {
        "id": new_id("grt"),
        "workspace_id": workspace_id,
        "app_id": app_id,
        "source": fact.source,
        "store_key": fact.store_key,
        "user_id": user_id,
        "account_token": fact.account_token,
        "current_token": fact.current_token,
        "customer_id": fact.customer_id,
        "linked_at": now if user_id else None,
        "created_at": now,
        "updated_at": now,
        **_state_values(fact),
        **_price_values(fact),
    }
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    inserted = conn.execute(
        dialect.insert(g)
        .values(**values)
        .on_conflict_do_nothing(index_elements=["app_id", "source", "store_key"])
        .returning(g.c.id)
    ).first()
    row = conn.execute(
        sa.select(g)
        .where(g.c.app_id == app_id, g.c.source == fact.source, g.c.store_key == fact.store_key)
        .with_for_update()
    ).one()
    if inserted is not None and user_id is not None:
        cache.notify(conn, app_id, user_id)
    return row, inserted is not None


def _update(conn: Connection, row: Row[Any], fact: StoreFact, *, user_id: str | None) -> bool:
    """Bring the row to `fact` if it is at least as new; link `user_id`. Returns whether the
    state changed."""
    changes: dict[str, Any] = {}
    newer = fact.stated_at >= row.stated_at
    if newer:
        wanted = _state_values(fact)
        changes.update({k: v for k, v in wanted.items() if getattr(row, k) != v})
        if fact.account_token and fact.account_token != row.account_token:
            changes["account_token"] = fact.account_token
        if fact.current_token and fact.current_token != row.current_token:
            changes["current_token"] = fact.current_token
        if fact.customer_id and fact.customer_id != row.customer_id:
            changes["customer_id"] = fact.customer_id  # what the customer search finds it by
        changes.update({k: v for k, v in _price_values(fact).items() if getattr(row, k) != v})
    if user_id != row.user_id:
        changes["user_id"] = user_id
        changes["linked_at"] = utcnow()
    if changes:
        changes["updated_at"] = utcnow()
        conn.execute(sa.update(g).where(g.c.id == row.id).values(**changes))
        # Every worker's cached rows of the user (and of the previous user, on a transfer).
        for user in {row.user_id, user_id} - {None}:
            cache.notify(conn, row.app_id, user)
    return newer and any(k in _STATE for k in changes)


def apply_receipt(
    conn: Connection, *, workspace_id: str, app_id: str, user_id: str, fact: StoreFact, now: datetime | None = None
) -> Applied:
    """A verified purchase the app shows for `user_id`: linked to them, or `NotTheBuyer`. `now`:
    the server's clock (the default), which bounds the statement's time."""
    fact = bounded(fact, now or utcnow())
    if not token_names_user(fact.source, fact.account_token, user_id):
        raise NotTheBuyer("The store's account token for this purchase names another user")
    row, created = _claim(conn, workspace_id=workspace_id, app_id=app_id, fact=fact, user_id=user_id)
    if row.user_id is not None and row.user_id != user_id:
        raise NotTheBuyer("This purchase belongs to another user of the app")
    changed = _update(conn, row, fact, user_id=user_id)
    stock.recount(conn, row.id, now or utcnow())
    return Applied(row.id, user_id, row.user_id, created, changed or created)


def apply_statement(
    conn: Connection, *, workspace_id: str, app_id: str, fact: StoreFact, now: datetime | None = None
) -> Applied:
    """What a store or provider states about a purchase (a notification, a sync). `now`: the
    server's clock (the default), which bounds the statement's time."""
    fact = bounded(fact, now or utcnow())
    row, created = _claim(conn, workspace_id=workspace_id, app_id=app_id, fact=fact, user_id=fact.user_hint)
    user = row.user_id
    if fact.user_hint and (user is None or (fact.transfer and fact.stated_at >= row.stated_at)):
        user = fact.user_hint
    changed = _update(conn, row, fact, user_id=user)
    stock.recount(conn, row.id, now or utcnow())
    return Applied(row.id, user, row.user_id, created, changed or created)


def grant_for(conn: Connection, *, app_id: str, source: str, store_key: str) -> Row[Any] | None:
    """The purchase's grant, or None (what a notification looks its user up by)."""
    return conn.execute(
        sa.select(g).where(g.c.app_id == app_id, g.c.source == source, g.c.store_key == store_key)
    ).first()


def fact_of_grant(grant: Any) -> StoreFact:
    """The ledger's state of a purchase (a grant row), as a fact (what a voided purchase amends)."""
    return StoreFact(
        source=grant.source,
        store_key=grant.store_key,
        product_id=grant.product_id,
        kind=grant.kind,
        channel=grant.channel,
        environment=grant.environment,
        stated_at=grant.stated_at,
        expires_at=grant.expires_at,
        grace_ends_at=grant.grace_ends_at,
        revoked_at=grant.revoked_at,
        revocation_reason=grant.revocation_reason,
        in_trial=bool(grant.in_trial),
        auto_renew=grant.auto_renew,
        account_token=grant.account_token,
        transaction_id=grant.transaction_id,
        current_token=grant.current_token,
        price_amount=grant.price_amount,
        price_currency=grant.price_currency,
        priced_at=grant.priced_at,
        billing_period=grant.billing_period,
    )


def grants_of(conn: Connection, *, workspace_id: str, app_id: str, user_id: str) -> list[Row[Any]]:
    """Every purchase linked to the user, newest statement first (the operator's view)."""
    return list(
        conn.execute(
            sa.select(g)
            .where(g.c.workspace_id == workspace_id, g.c.app_id == app_id, g.c.user_id == user_id)
            .order_by(g.c.stated_at.desc(), g.c.id)
        )
    )


def _verdict_columns(now: datetime | sa.BindParameter[Any]) -> tuple[sa.ColumnElement[Any], sa.ColumnElement[Any]]:
    """`active` computed now: not a consumable, not revoked by now, and access not ended."""
    active = sa.and_(
        g.c.kind != "consumable",
        sa.or_(g.c.revoked_at.is_(None), g.c.revoked_at > now),
        sa.or_(g.c.access_ends_at.is_(None), g.c.access_ends_at > now),
    )
    return sa.case((active, 1), else_=0).label("active"), g.c.channel


def current(
    conn: Connection, *, workspace_id: str, app_id: str, user_id: str, now: datetime | None = None
) -> Entitlement:
    """The user's entitlement in the workspace's app, computed at `now`."""
    active, channel = _verdict_columns(now or utcnow())
    row = conn.execute(
        sa.select(active, channel)
        .where(g.c.workspace_id == workspace_id, g.c.app_id == app_id, g.c.user_id == user_id)
        .order_by(active.desc(), g.c.access_ends_at.desc().nulls_first())
        .limit(1)
    ).first()
    return Entitlement(False, SOURCE_NONE) if row is None else Entitlement(bool(row.active), row.channel)


def _by_key_statement() -> sa.Select[Any]:
    active, channel = _verdict_columns(sa.bindparam("now", type_=g.c.stated_at.type))
    return (
        sa.select(apps.c.id, active, channel)
        .select_from(apps)
        .outerjoin(g, (g.c.app_id == apps.c.id) & (g.c.user_id == sa.bindparam("user_id")))
        .where(apps.c.publishable_key == sa.bindparam("publishable_key"), apps.c.revoked_at.is_(None))
        .order_by(active.desc(), g.c.access_ends_at.desc().nulls_first())
        .limit(1)
    )


def current_for_key(
    conn: Connection, *, publishable_key: str, user_id: str, now: datetime | None = None
) -> Entitlement | None:
    """The entitlement of the user in the app of this key, in ONE driver statement (the read hot
    path: resolving the key first would be a second round trip, and SQLAlchemy's per-execution
    bookkeeping costs more than the indexed lookup itself; `warehouse/driver.py`). None when the
    key is unknown or revoked."""
    rows = driver_statement(conn, "entitlement_for_key", _by_key_statement).execute(
        conn, {"now": now or utcnow(), "user_id": user_id, "publishable_key": publishable_key}
    )
    if not rows:
        return None
    _app, active, channel = rows[0]
    if channel is None:
        return Entitlement(False, SOURCE_NONE)
    return Entitlement(bool(active), channel)


def current_for_key_cached(db: Database, *, publishable_key: str, user_id: str) -> Entitlement | None:
    """`current_for_key` from this worker's cache of the ledger rows (`warehouse.entitlements.cache`):
    the rows are reused only while no change to them can have committed, and the verdict is
    computed from them now."""
    entry = cache.reads_for(db).read(db, publishable_key=publishable_key, user_id=user_id)
    if entry is None:
        return None
    active, channel = cache.verdict(entry.grants, cache.bound_now(db.engine.dialect))
    return Entitlement(False, SOURCE_NONE) if channel is None else Entitlement(active, channel)
