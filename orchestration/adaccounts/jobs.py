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
