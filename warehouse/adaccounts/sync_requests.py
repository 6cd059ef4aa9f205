"""An ad account's "sync now" requests: asked for on the dashboard, run by Dagster.

The Flask app never calls an ad platform: `request_sync` writes a `pending` row (who asked and
when) and returns; the sensor `ad_accounts_sync_sensor` (orchestration/adaccounts)
launches one `ad_accounts_sync_job` run per pending row; the run `claim`s it (`running`, with
its run id) and ends it with `finish_success` (the sync's counts) or `finish_failure` (the
platform's error text, or ours). A run that dies before ending its request is found by the
sensor's sweep or the run-failure sensor, which end it with `finish_failure` too: no request
stays open for good.

At most one open (pending or running) request per account, kept by a partial unique index: a
request while one is open answers that one (`created` False), also when two arrive at once.
Every function works in the caller's transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection, Row

from transforms.adaccounts.sync_requests import OPEN_STATUSES
from transforms.ids import new_id
from transforms.integrations.errors import truncate
from warehouse.adaccounts.repository import SyncCounts, get_account
from warehouse.adaccounts.tables import ad_account_sync_requests as requests
from warehouse.db import utcnow
from warehouse.errors import NotFound, TransitionRefused
from warehouse.queue import Subject, WorkQueue

HISTORY_LIMIT = 10
QUEUE = WorkQueue(requests, subject="ad_account_id", waiting="pending", ordered_by="requested_at")


@dataclass(frozen=True)
class SyncRequest:
    id: str
    workspace_id: str
    ad_account_id: str
    requested_by: str
    requested_at: datetime
    status: str
    run_id: str | None
    started_at: datetime | None
    finished_at: datetime | None
    objects_created: int | None
    objects_updated: int | None
    objects_unchanged: int | None
    objects_removed: int | None
    mapped_campaigns: int | None
    mapped_creatives: int | None
    summary: str | None
    error_code: str | None
    error_message: str | None

    @property
    def open(self) -> bool:
        return self.status in OPEN_STATUSES

    @property
    def objects_listed(self) -> int | None:
        parts = (self.objects_created, self.objects_updated, self.objects_unchanged)
        return None if any(p is None for p in parts) else sum(p or 0 for p in parts)


def _request(row: Row[Any]) -> SyncRequest:
    return SyncRequest(**{name: getattr(row, name) for name in SyncRequest.__dataclass_fields__})


def get_request(conn: Connection, *, request_id: str) -> SyncRequest:
    row = QUEUE.get(conn, request_id)
    if row is None:
        raise NotFound(f"Sync request {request_id} not found")
    return _request(row)


def open_request(conn: Connection, *, ad_account_id: str) -> SyncRequest | None:
    row = QUEUE.open_for(conn, ad_account_id)
    return _request(row) if row is not None else None


def request_sync(
    conn: Connection, *, ad_account_id: str, workspace_id: str, requested_by: str, now: datetime | None = None
) -> tuple[SyncRequest, bool]:
    """A `pending` request; `(request, True)`, or `(the open request, False)` while one is open.

    The account must be the workspace's (`NotFound` otherwise) and not disconnected
    (`TransitionRefused`: it has no credentials to sync with). Two requests racing past the
    check collide on the partial unique index; the loser reads the winner's row."""
    now = now or utcnow()
    account = get_account(conn, ad_account_id=ad_account_id, workspace_id=workspace_id)
    row, created = QUEUE.insert_once(
        conn,
        Subject("Ad account", ad_account_id, account.status),
        {
            "id": new_id("adsync"),
            "workspace_id": account.workspace_id,
            "requested_by": requested_by[:200],
            "requested_at": now,
        },
    )
    return _request(row), created


def pending_requests(conn: Connection) -> list[SyncRequest]:
    """Every pending request, oldest first (the sensor's run requests)."""
    return [_request(r) for r in QUEUE.with_status(conn, ["pending"])]


def open_requests(conn: Connection) -> list[SyncRequest]:
    """Every pending or running request, oldest first (what the sweep checks against the runs)."""
    return [_request(r) for r in QUEUE.with_status(conn, OPEN_STATUSES)]


def recent_requests(conn: Connection, *, ad_account_id: str, limit: int = HISTORY_LIMIT) -> list[SyncRequest]:
    """An account's requests, newest first."""
    return [_request(r) for r in QUEUE.history(conn, ad_account_id, limit)]


def claim(conn: Connection, *, request_id: str, run_id: str, now: datetime | None = None) -> SyncRequest | None:
    """`pending` -> `running` under this run; None when it is no longer pending (another run took
    it, or the sweep ended it): the caller then has nothing to do."""
    now = now or utcnow()
    taken = QUEUE.claim(conn, request_id, run_id, now)
    return get_request(conn, request_id=request_id) if taken else None


def finish_success(
    conn: Connection,
    *,
    request_id: str,
    counts: SyncCounts,
    mapped_campaigns: int,
    mapped_creatives: int,
    summary: str,
    now: datetime | None = None,
) -> SyncRequest:
    """`running` -> `succeeded` with what the sync wrote (`TransitionRefused` if it is not running)."""
    return _finish(
        conn,
        request_id,
        now or utcnow(),
        ("running",),
        status="succeeded",
        objects_created=counts.created,
        objects_updated=counts.updated,
        objects_unchanged=counts.unchanged,
        objects_removed=counts.removed,
        mapped_campaigns=mapped_campaigns,
        mapped_creatives=mapped_creatives,
        summary=truncate(summary),
    )


def finish_failure(
    conn: Connection, *, request_id: str, code: str | None, message: str, now: datetime | None = None
) -> SyncRequest:
    """An open request -> `failed` with the platform's error (`code` its family: auth,
    rate_limited, ...) or ours (`code` None). `TransitionRefused` if it had already ended."""
    return _finish(
        conn,
        request_id,
        now or utcnow(),
        OPEN_STATUSES,
        status="failed",
        error_code=code[:16] if code else None,
        error_message=truncate(message),
    )


def _finish(conn: Connection, request_id: str, now: datetime, allowed: tuple[str, ...], **values: Any) -> SyncRequest:
    if not QUEUE.end(conn, request_id, now, allowed, values):
        current = get_request(conn, request_id=request_id)
        raise TransitionRefused(f"Sync request {request_id} is {current.status}; it cannot end now", current.status)
    return get_request(conn, request_id=request_id)
