"""`ad_accounts_sync_job`: the registry sync of every live ad account (or one workspace's, or one).

`flokit refresh` runs it before the reports, so that the engine reads a registry as fresh as the
data. The dashboard's "Sync now" reaches it through `ad_accounts_sync_sensor`, with a
`request_id` in its config: the run then syncs that request's account and records the outcome
on the request (`orchestration.adaccounts.requests`). A platform's failure is that account's
outcome (logged, and on a refusal the account's `error` and `integration.error`); it does not
fail the run, since the other accounts and the refresh's later steps are still worth running.
"""

# No `from __future__ import annotations`: Dagster reads the op's config annotation at runtime.

import dagster as dg

from orchestration.adaccounts.requests import execute_request
from orchestration.adaccounts.sync import sync_accounts
from orchestration.resources import DatabaseResource, DataDirResource, InstanceKeyResource
from warehouse.adaccounts.repository import live_accounts_for_operator

REQUEST_TAG = "flokit/ad_account_sync_request_id"
ACCOUNT_TAG = "flokit/ad_account_id"


class AdAccountsSyncConfig(dg.Config):
    workspace_id: str | None = None
    ad_account_id: str | None = None
    # A dashboard "Sync now" request (`ad_account_sync_requests`): its account is synced and the
    # outcome recorded on it; `ad_account_id` and `workspace_id` then only name it for the UI.
    request_id: str | None = None


@dg.op(description="Reads every object of the live ad accounts into the registry, mapped to the report labels.")
def sync_ad_accounts(
    context: dg.OpExecutionContext,
    config: AdAccountsSyncConfig,
    database: DatabaseResource,
    data_dir: DataDirResource,
    instance_key: InstanceKeyResource,
) -> None:
    if config.request_id is not None:
        ended = execute_request(
            database.database(),
            data_dir.paths.lake(),
            instance_key.key(),
            config.request_id,
            context.run_id,
            log=context.log.info,
        )
        if ended is not None:
            line = f"sync request {ended.id} ended {ended.status}: {ended.summary or ended.error_message}"
            (context.log.info if ended.status == "succeeded" else context.log.warning)(line)
        return
    results = sync_accounts(
        database.database(),
        data_dir.paths.lake(),
        instance_key.key(),
        workspace_id=config.workspace_id,
        ad_account_id=config.ad_account_id,
        log=context.log.info,
    )
    for result in results:
        (context.log.info if result.status == "succeeded" else context.log.warning)(result.summary())


@dg.job(
    description="Syncs the ad accounts' entity registry (campaigns, ad sets or ad groups, ads); run by flokit refresh.",
    executor_def=dg.in_process_executor,
    tags={"flokit/domain": "adaccounts"},
)
def ad_accounts_sync_job() -> None:
    sync_ad_accounts()


# A quarter of an hour before each six-hourly reports refresh (`reports_schedule`, "0 */6"), so
# the engine that runs after the reports sizes its proposals on a fresh registry, and the
# executor's preflight (which refuses a registry older than 48 h) finds one in a deployment that
# only runs the daemon.
SYNC_CRON = "45 5-23/6 * * *"


@dg.schedule(
    name="ad_accounts_sync_schedule",
    cron_schedule=SYNC_CRON,
    job=ad_accounts_sync_job,
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="The registry sync of every live ad account, before each six-hourly reports refresh.",
)
def ad_accounts_sync_schedule(
    context: dg.ScheduleEvaluationContext, database: DatabaseResource
) -> dg.RunRequest | dg.SkipReason:
    with database.database().read() as conn:
        if not live_accounts_for_operator(conn):
            return dg.SkipReason("no live ad account")
    return dg.RunRequest(run_key=None)


def request_run_config(request_id: str, workspace_id: str, ad_account_id: str) -> dict[str, object]:
    config = {"workspace_id": workspace_id, "ad_account_id": ad_account_id, "request_id": request_id}
    return {"ops": {"sync_ad_accounts": {"config": config}}}
