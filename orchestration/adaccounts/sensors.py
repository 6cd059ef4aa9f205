"""The sensors of the dashboard's "Sync now": pending requests become runs, and no request is
left open for good.

`ad_accounts_sync_sensor` requests one `ad_accounts_sync_job` run per pending request
with `run_key` = the request id, so a request is run at most once however often the sensor sees
it. It first sweeps, as `integration_sync_sensor` does for the integrations' syncs: a request
whose run has ended (failed, canceled, or killed and marked so by run monitoring) while the row
still says pending or running is marked failed, as is one running for longer than any registry
sync may take. `ad_accounts_sync_failure_sensor` does the same at once when a run fails. Both
are built by `orchestration.queue.RunQueue` from the spec `SYNC_REQUESTS` below.
"""

from __future__ import annotations

from datetime import timedelta

import dagster as dg

from orchestration.adaccounts.jobs import ACCOUNT_TAG, REQUEST_TAG, ad_accounts_sync_job, request_run_config
from orchestration.queue import RunQueue
from warehouse.adaccounts import sync_requests as requests
from warehouse.db import Connection

# Longer than any registry sync should take: a Meta account of a few thousand objects reads in
# well under a minute at 25 per page, and the client sits out at most a few rate-limit waits
# (clients/ad_platform.py). Past it, the run is presumed dead.
MAX_SYNC = timedelta(hours=2)


def request_run(request: requests.SyncRequest) -> dg.RunRequest:
    return dg.RunRequest(
        run_key=request.id,
        run_config=request_run_config(request.id, request.workspace_id, request.ad_account_id),
        tags={REQUEST_TAG: request.id, ACCOUNT_TAG: request.ad_account_id},
    )


def _fail(conn: Connection, request_id: str, reason: str) -> requests.SyncRequest:
    return requests.finish_failure(conn, request_id=request_id, code=None, message=f"the sync was abandoned: {reason}")


SYNC_REQUESTS: RunQueue[requests.SyncRequest] = RunQueue(
    job=ad_accounts_sync_job,
    tag=REQUEST_TAG,
    max_running=MAX_SYNC,
    run_requests=lambda conn: [request_run(r) for r in requests.pending_requests(conn)],
    open_rows=requests.open_requests,
    fail=_fail,
    idle="no pending ad account sync request ({swept} abandoned request(s) marked failed)",
    noun="sync request",
    description="Requests one ad_accounts_sync_job run per pending dashboard 'Sync now' request.",
    failure_description="Marks a dashboard 'Sync now' request failed when its run crashes before ending it.",
    # The sweep has never failed a running request for its run id missing from the instance;
    # kept so (behaviour unchanged): the `max_running` bound still ends it.
    check_run_exists=False,
)


ad_accounts_sync_failure_sensor = SYNC_REQUESTS.failure_sensor()
