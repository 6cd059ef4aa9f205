"""`ad_accounts_sync_job`: the registry sync of every live ad account (or one workspace's, or one).

`flokit refresh` runs it before the reports, so that the engine reads a registry as fresh as the
data. A platform's failure is that account's outcome (logged, and on a refusal the account's
`error` and `integration.error`); it does not fail the run, since the other accounts and the
refresh's later steps are still worth running.
"""

# No `from __future__ import annotations`: Dagster reads the op's config annotation at runtime.

import dagster as dg

from orchestration.adaccounts.sync import sync_accounts
from orchestration.resources import DatabaseResource, DataDirResource, InstanceKeyResource
from warehouse.adaccounts.repository import live_accounts


class AdAccountsSyncConfig(dg.Config):
    workspace_id: str | None = None
    ad_account_id: str | None = None


@dg.op(description="Reads every object of the live ad accounts into the registry, mapped to the report labels.")
def sync_ad_accounts(
    context: dg.OpExecutionContext,
    config: AdAccountsSyncConfig,
    database: DatabaseResource,
    data_dir: DataDirResource,
    instance_key: InstanceKeyResource,
) -> None:
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
    name="ad_accounts_schedule",
    cron_schedule=SYNC_CRON,
    job=ad_accounts_sync_job,
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="The registry sync of every live ad account, before each six-hourly reports refresh.",
)
def ad_accounts_schedule(
    context: dg.ScheduleEvaluationContext, database: DatabaseResource
) -> dg.RunRequest | dg.SkipReason:
    with database.database().read() as conn:
        if not live_accounts(conn):
            return dg.SkipReason("no live ad account")
    return dg.RunRequest(run_key=None)
