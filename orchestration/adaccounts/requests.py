"""One "sync now" request from its pending row to its end: the body of `ad_accounts_sync_job`
when the sensor launched it for a request.

The request is claimed (`pending` -> `running`, with the run id) in one transaction; the
registry sync (`sync_account`: the platform called outside any transaction) runs; the request
ends in one more, `succeeded` with the counts or `failed` with the platform's error text. A
platform's refusal or outage is the sync's outcome, not the run's: the run succeeds and the
request says `failed`. Any other exception is ours: the request is marked failed with its text
and the exception propagates, so the run fails in the Dagster UI with the stack trace too.
"""

from __future__ import annotations

from collections.abc import Callable

from clients.ad_platform import Retrier
from orchestration.adaccounts.sync import SyncResult, sync_account
from warehouse.adaccounts import sync_requests as requests
from warehouse.db import Database
from warehouse.errors import TransitionRefused
from warehouse.lake import Lake


def execute_request(
    database: Database,
    lake: Lake,
    instance_key: str,
    request_id: str,
    run_id: str,
    *,
    retrier: Retrier | None = None,
    log: Callable[[str], None] = lambda _line: None,
) -> requests.SyncRequest | None:
    """Run one pending request to its end; None when it is no longer pending (nothing to do)."""
    with database.write() as conn:
        claimed = requests.claim(conn, request_id=request_id, run_id=run_id)
    if claimed is None:
        log(f"sync request {request_id} is not pending any more; nothing to do")
        return None
    log(f"sync request {request_id}: ad account {claimed.ad_account_id}, asked by {claimed.requested_by}")
    try:
        result = sync_account(database, lake, instance_key, claimed.ad_account_id, retrier=retrier, log=log)
    except TransitionRefused as refused:
        # Disconnected between the click and the run: nothing to sync with; not a fault of the run.
        return _fail(database, request_id, "config", str(refused))
    except BaseException as exc:
        _fail(database, request_id, None, f"the sync crashed: {type(exc).__name__}: {exc}")
        raise
    return _end(database, request_id, result)


def _end(database: Database, request_id: str, result: SyncResult) -> requests.SyncRequest:
    with database.write() as conn:
        if result.status == "succeeded" and result.counts is not None:
            return requests.finish_success(
                conn,
                request_id=request_id,
                counts=result.counts,
                mapped_campaigns=result.mapped_campaigns,
                mapped_creatives=result.mapped_creatives,
                summary=result.summary(),
            )
        return requests.finish_failure(
            conn, request_id=request_id, code=result.error_code, message=result.message or result.summary()
        )


def _fail(database: Database, request_id: str, code: str | None, message: str) -> requests.SyncRequest:
    with database.write() as conn:
        return requests.finish_failure(conn, request_id=request_id, code=code, message=message)
