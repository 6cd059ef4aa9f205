"""Ad accounts and their entity registry: connect, read, remove, sync bookkeeping, live state.

Every function takes the caller's connection and changes state in the caller's transaction, so a
sync's end (the registry, the account's status, the `integration.error` event) commits as one
change or not at all. The credentials are sealed here and nowhere else, exactly as the
integrations' are (`warehouse.integrations.repository`): AES-GCM under a key derived from the
instance key for the purpose "ad-account-credentials", bound to the account id, with the last
four characters of each secret kept apart for display.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from transforms.adaccounts.entities import AccountInfo, PlatformEntity
from transforms.adaccounts.kinds import ValidConfig, kind_of, secret_hint
from transforms.ids import new_id
from transforms.integrations.errors import truncate
from transforms.webhooks.payloads import ad_account_sync_failed
from warehouse import audit
from warehouse.adaccounts.tables import ad_accounts, ad_entities
from warehouse.connected import Connected
from warehouse.db import utcnow
from warehouse.errors import AlreadyExists, NotFound, TransitionRefused
from warehouse.tables import workspaces
from warehouse.webhooks.outbox import emit_event

SEAL_PURPOSE = "ad-account-credentials"
# The option naming the account on its platform: two live accounts of a workspace may not name
# the same one (the sandbox has none: one live sandbox per workspace).
IDENTITY_OPTION = {"meta": "ad_account_id", "apple_search_ads": "org_id", "sandbox": None}
ROWS = Connected(ad_accounts, "Ad account", sealed="config", purpose=SEAL_PURPOSE)


@dataclass(frozen=True)
class AdAccount:
    id: str
    workspace_id: str
    platform: str
    name: str
    status: str
    options: dict[str, Any]
    credential_hints: dict[str, str]
    external_account_id: str | None
    currency: str | None
    last_synced_at: datetime | None
    last_error: str | None
    created_at: datetime


@dataclass(frozen=True)
class Entity:
    """A registry row: the platform's object as last synced (or, on the sandbox, as last set)."""

    ad_account_id: str
    workspace_id: str
    entity_type: str
    external_id: str
    parent_external_id: str | None
    name: str
    report_campaign: str | None
    report_creative: str | None
    daily_budget: int | None
    currency: str | None
    status: str
    edited_at: datetime | None
    synced_at: datetime
    removed_at: datetime | None

    def as_platform(self) -> PlatformEntity:
        return PlatformEntity(
            self.entity_type,
            self.external_id,
            self.parent_external_id,
            self.name,
            self.status,
            self.daily_budget,
            self.currency,
            self.edited_at,
            self.report_campaign,
            self.report_creative,
        )


@dataclass(frozen=True)
class SyncCounts:
    """What a sync changed in the registry: objects new, changed, unchanged, and no longer listed."""

    created: int
    updated: int
    unchanged: int
    removed: int

    @property
    def listed(self) -> int:
        return self.created + self.updated + self.unchanged


def _account(row: Row[Any]) -> AdAccount:
    return ROWS.record(AdAccount, row)


def _entity(row: Row[Any]) -> Entity:
    return Entity(**{name: getattr(row, name) for name in Entity.__dataclass_fields__})


def default_name(platform: str, config: ValidConfig) -> str:
    option = IDENTITY_OPTION.get(platform)
    return f"{platform} {config.options[option]}" if option else "sandbox"


# --- the operator's side -------------------------------------------------------------------------


def connect(
    conn: Connection,
    *,
    workspace_id: str,
    platform: str,
    config: ValidConfig,
    instance_key: str,
    actor: str,
    name: str | None = None,
    now: datetime | None = None,
) -> AdAccount:
    """Save an ad account, its secrets sealed; `connected` (nothing is called: the first sync
    reads the account). The same platform account twice in a workspace is `AlreadyExists`."""
    now = now or utcnow()
    kind_of(platform)
    if conn.execute(sa.select(workspaces.c.id).where(workspaces.c.id == workspace_id)).first() is None:
        raise NotFound(f"no workspace {workspace_id}")
    option = IDENTITY_OPTION[platform]
    for other in list_accounts(conn, workspace_id=workspace_id):
        if other.platform != platform or other.status == "disconnected":
            continue
        if option is None or other.options.get(option) == config.options.get(option):
            what = f"{option} {config.options[option]}" if option else "a sandbox"
            raise AlreadyExists(
                f"workspace {workspace_id} already has {what} connected ({other.id}); "
                "remove it first to connect it again"
            )
    account_id = new_id("adacct")
    conn.execute(
        ad_accounts.insert().values(
            id=account_id,
            workspace_id=workspace_id,
            platform=platform,
            name=(name or default_name(platform, config))[:200],
            status="connected",
            options=config.options,
            config=ROWS.seal(instance_key, account_id, config.secrets),
            credential_hints={field: secret_hint(value) for field, value in config.secrets.items()},
            created_at=now,
            updated_at=now,
        )
    )
    audit.record(
        conn,
        workspace_id=workspace_id,
        actor=actor,
        action="ad_account.connected",
        subject_id=account_id,
        detail={"platform": platform, "options": _audit_options(config.options)},
    )
    return get_account(conn, ad_account_id=account_id, workspace_id=workspace_id)


def _audit_options(options: dict[str, Any]) -> dict[str, Any]:
    """The options as the audit log keeps them: the sandbox's campaign list counted, not copied."""
    return {k: (f"{len(v)} campaign(s)" if k == "campaigns" else v) for k, v in options.items()}


def remove(
    conn: Connection, *, ad_account_id: str, workspace_id: str, actor: str, now: datetime | None = None
) -> AdAccount:
    """`disconnected`, the credentials erased; the registry rows are kept, marked removed (an
    action's history may still name them)."""
    now = now or utcnow()
    account = get_account(conn, ad_account_id=ad_account_id, workspace_id=workspace_id)
    conn.execute(
        ad_accounts.update()
        .where(ad_accounts.c.id == ad_account_id)
        .values(status="disconnected", config=None, credential_hints={}, updated_at=now)
    )
    conn.execute(
        ad_entities.update()
        .where(ad_entities.c.ad_account_id == ad_account_id, ad_entities.c.removed_at.is_(None))
        .values(removed_at=now)
    )
    audit.record(
        conn,
        workspace_id=account.workspace_id,
        actor=actor,
        action="ad_account.removed",
        subject_id=ad_account_id,
        detail={"platform": account.platform},
    )
    return get_account(conn, ad_account_id=ad_account_id, workspace_id=workspace_id)


def list_accounts(conn: Connection, *, workspace_id: str) -> list[AdAccount]:
    return [_account(r) for r in ROWS.in_workspace(conn, workspace_id)]


def get_account(conn: Connection, *, ad_account_id: str, workspace_id: str) -> AdAccount:
    """The workspace's account; `NotFound` when there is none, or it belongs to another workspace."""
    return _account(ROWS.one(conn, ad_account_id, workspace_id))


def get_account_for_operator(conn: Connection, *, ad_account_id: str) -> AdAccount:
    """The account, whichever workspace holds it: for the syncs, the executor and the operator's
    CLI, which act for every workspace. `NotFound` when there is none."""
    return _account(ROWS.one(conn, ad_account_id, None))


def config_of(conn: Connection, *, ad_account_id: str, instance_key: str) -> ValidConfig:
    """The account's config with its secrets unsealed (for a client)."""
    return ROWS.config(conn, ad_account_id, instance_key)


def live_accounts(conn: Connection, *, workspace_id: str) -> list[AdAccount]:
    """The workspace's accounts a sync should read (connected, or in error: a sync is how it recovers)."""
    return _live(conn, ad_accounts.c.workspace_id == workspace_id)


def live_accounts_for_operator(conn: Connection) -> list[AdAccount]:
    """Every workspace's live accounts (the schedule and `flokit refresh` sync them all)."""
    return _live(conn)


def _live(conn: Connection, *where: sa.ColumnElement[bool]) -> list[AdAccount]:
    query = ad_accounts.select().where(ad_accounts.c.status.in_(["connected", "syncing", "error"]), *where)
    return [_account(r) for r in conn.execute(query.order_by(ad_accounts.c.created_at, ad_accounts.c.id))]


# --- the registry --------------------------------------------------------------------------------


def entities(conn: Connection, *, ad_account_id: str, include_removed: bool = False) -> list[Entity]:
    query = ad_entities.select().where(ad_entities.c.ad_account_id == ad_account_id)
    if not include_removed:
        query = query.where(ad_entities.c.removed_at.is_(None))
    rows = conn.execute(query.order_by(ad_entities.c.entity_type, ad_entities.c.name, ad_entities.c.external_id))
    return [_entity(r) for r in rows]


def workspace_entities(conn: Connection, *, workspace_id: str) -> list[tuple[AdAccount, Entity]]:
    """Every live object of the workspace's live accounts (the engine's view of the registry)."""
    accounts = {a.id: a for a in live_accounts(conn, workspace_id=workspace_id)}
    rows = conn.execute(
        ad_entities.select()
        .where(
            ad_entities.c.workspace_id == workspace_id,
            ad_entities.c.ad_account_id.in_(list(accounts)),
            ad_entities.c.removed_at.is_(None),
        )
        .order_by(ad_entities.c.ad_account_id, ad_entities.c.entity_type, ad_entities.c.external_id)
    )
    return [(accounts[r.ad_account_id], _entity(r)) for r in rows]


def get_entity(conn: Connection, *, ad_account_id: str, entity_type: str, external_id: str) -> Entity:
    row = conn.execute(
        ad_entities.select().where(
            ad_entities.c.ad_account_id == ad_account_id,
            ad_entities.c.entity_type == entity_type,
            ad_entities.c.external_id == external_id,
        )
    ).first()
    if row is None:
        raise NotFound(f"no {entity_type} {external_id} in ad account {ad_account_id}")
    return _entity(row)


def set_live_state(
    conn: Connection,
    *,
    ad_account_id: str,
    entity_type: str,
    external_id: str,
    daily_budget: int | None = None,
    status: str | None = None,
    edited_at: datetime | None = None,
    now: datetime | None = None,
) -> Entity:
    """Record one object's live state: what a read-back found, or (sandbox) what was set.
    Only the given fields change; `edited_at` is the platform's edit time when known."""
    now = now or utcnow()
    values: dict[str, Any] = {"synced_at": now}
    if daily_budget is not None:
        values["daily_budget"] = daily_budget
    if status is not None:
        values["status"] = status
    if edited_at is not None:
        values["edited_at"] = edited_at
    done = conn.execute(
        ad_entities.update()
        .where(
            ad_entities.c.ad_account_id == ad_account_id,
            ad_entities.c.entity_type == entity_type,
            ad_entities.c.external_id == external_id,
        )
        .values(**values)
    ).rowcount
    if not done:
        raise NotFound(f"no {entity_type} {external_id} in ad account {ad_account_id}")
    return get_entity(conn, ad_account_id=ad_account_id, entity_type=entity_type, external_id=external_id)


_COMPARED = (
    "parent_external_id",
    "name",
    "report_campaign",
    "report_creative",
    "daily_budget",
    "currency",
    "status",
    "edited_at",
)


def upsert_entities(
    conn: Connection, *, account: AdAccount, listed: Iterable[PlatformEntity], now: datetime | None = None
) -> SyncCounts:
    """Write what the platform lists: new objects inserted, changed ones updated, objects no
    longer listed marked `removed_at` (a listed object that was removed comes back)."""
    now = now or utcnow()
    existing = {
        (e.entity_type, e.external_id): e for e in entities(conn, ad_account_id=account.id, include_removed=True)
    }
    created = updated = unchanged = 0
    seen: set[tuple[str, str]] = set()
    for item in listed:
        key = (item.entity_type, item.external_id)
        if key in seen:
            continue
        seen.add(key)
        values = {name: getattr(item, name) for name in _COMPARED}
        values["name"] = values["name"][:400]
        before = existing.get(key)
        if before is None:
            conn.execute(
                ad_entities.insert().values(
                    ad_account_id=account.id,
                    workspace_id=account.workspace_id,
                    entity_type=item.entity_type,
                    external_id=item.external_id,
                    synced_at=now,
                    **values,
                )
            )
            created += 1
            continue
        changed = before.removed_at is not None or any(getattr(before, k) != v for k, v in values.items())
        conn.execute(
            ad_entities.update()
            .where(
                ad_entities.c.ad_account_id == account.id,
                ad_entities.c.entity_type == item.entity_type,
                ad_entities.c.external_id == item.external_id,
            )
            .values(synced_at=now, removed_at=None, **values)
        )
        updated += changed
        unchanged += not changed
    gone = [k for k, e in existing.items() if k not in seen and e.removed_at is None]
    for entity_type, external_id in gone:
        conn.execute(
            ad_entities.update()
            .where(
                ad_entities.c.ad_account_id == account.id,
                ad_entities.c.entity_type == entity_type,
                ad_entities.c.external_id == external_id,
            )
            .values(removed_at=now)
        )
    return SyncCounts(created=created, updated=updated, unchanged=unchanged, removed=len(gone))


# --- a sync's bookkeeping ------------------------------------------------------------------------


def begin_sync(conn: Connection, *, ad_account_id: str, now: datetime | None = None) -> AdAccount:
    """`syncing` (a disconnected account cannot sync: `TransitionRefused`)."""
    now = now or utcnow()
    account = get_account_for_operator(conn, ad_account_id=ad_account_id)
    if account.status == "disconnected":
        raise TransitionRefused(f"Ad account {ad_account_id} is disconnected; connect it again to sync", "disconnected")
    conn.execute(ad_accounts.update().where(ad_accounts.c.id == ad_account_id).values(status="syncing", updated_at=now))
    return get_account_for_operator(conn, ad_account_id=ad_account_id)


def finish_sync_success(
    conn: Connection,
    *,
    ad_account_id: str,
    info: AccountInfo,
    listed: Iterable[PlatformEntity],
    now: datetime | None = None,
) -> SyncCounts:
    """The registry written; the account `connected` with the platform's id and currency."""
    now = now or utcnow()
    account = get_account_for_operator(conn, ad_account_id=ad_account_id)
    counts = upsert_entities(conn, account=account, listed=listed, now=now)
    conn.execute(
        ad_accounts.update()
        .where(ad_accounts.c.id == ad_account_id, ad_accounts.c.status != "disconnected")
        .values(
            status="connected",
            last_error=None,
            last_synced_at=now,
            external_account_id=info.external_account_id[:64],
            currency=info.currency,
            updated_at=now,
        )
    )
    return counts


def finish_sync_failure(
    conn: Connection,
    *,
    ad_account_id: str,
    message: str,
    refused: bool,
    error_code: str = "auth",
    now: datetime | None = None,
) -> AdAccount:
    """A refusal (the platform rejected the credentials) puts the account in `error` with the
    message and emits `integration.error` once, when the account enters `error` (a later sync
    refused again sends nothing more: the workspace was told); a transient failure (rate limit,
    5xx, timeout) only fails this sync: the account goes back to what it was."""
    now = now or utcnow()
    message = truncate(message)
    account = get_account_for_operator(conn, ad_account_id=ad_account_id)
    if account.status == "disconnected":
        return account
    if refused:
        conn.execute(
            ad_accounts.update()
            .where(ad_accounts.c.id == ad_account_id)
            .values(status="error", last_error=message, updated_at=now)
        )
        if account.last_error is not None:
            return get_account_for_operator(conn, ad_account_id=ad_account_id)
        emit_event(
            conn,
            workspace_id=account.workspace_id,
            event_type="integration.error",
            data=ad_account_sync_failed(
                ad_account_id=account.id, platform=account.platform, error_code=error_code, message=message
            ),
            now=now,
        )
    else:
        status = "error" if account.last_error else "connected"
        conn.execute(
            ad_accounts.update().where(ad_accounts.c.id == ad_account_id).values(status=status, updated_at=now)
        )
    return get_account_for_operator(conn, ad_account_id=ad_account_id)
