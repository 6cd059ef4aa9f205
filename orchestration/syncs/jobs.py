"""`integration_sync_job`: one run per sync (the sensor's `run_key` is the sync id)."""

# No `from __future__ import annotations`: Dagster reads the op's config annotation at runtime.

import dagster as dg

from orchestration.resources import DatabaseResource, DataDirResource, InstanceKeyResource
from orchestration.syncs.execute import execute_sync
from transforms.integrations.kinds import kind_of
from warehouse.reports.report_lake import SPEND_RAW

SYNC_TAG = "flokit/sync_id"
INTEGRATION_TAG = "flokit/integration_id"
PROVIDER_TAG = "flokit/provider"  # the instance's tag_concurrency_limits cap runs per provider


class SyncConfig(dg.Config):
    sync_id: str


@dg.op(description="Pulls from the integration's provider and writes through landing or the spend writer.")
def run_integration_sync(
    context: dg.OpExecutionContext,
    config: SyncConfig,
    database: DatabaseResource,
    data_dir: DataDirResource,
    instance_key: InstanceKeyResource,
) -> None:
    outcome = execute_sync(
        database.database(),
        data_dir.paths.lake(),
        instance_key.key(),
        config.sync_id,
        context.run_id,
        log=context.log.info,
    )
    if outcome is None:
        return
    metadata: dict[str, str | int] = {
        "sync_id": outcome.sync_id,
        "integration_id": outcome.integration_id,
        "integration_type": outcome.integration_type,
        "workspace_id": outcome.workspace_id,
        "status": outcome.status,
        "records_written": outcome.records,
    }
    if outcome.status == "succeeded" and kind_of(outcome.integration_type).produces == "spend":
        # spend_raw is an external asset: the sync reports the delivery, so the UI shows who wrote it.
        context.log_event(dg.AssetMaterialization(asset_key=SPEND_RAW, metadata=metadata))
    context.log.info(f"sync {outcome.sync_id} ended {outcome.status}: {metadata}")
    if outcome.status == "failed":
        context.log.warning(f"{outcome.error_code}: {outcome.error_message}")


@dg.job(
    description="Runs one queued integration sync (config: sync_id). Requested by integration_sync_sensor.",
    executor_def=dg.in_process_executor,
    tags={"flokit/domain": "syncs"},
)
def integration_sync_job() -> None:
    run_integration_sync()


def sync_run_config(sync_id: str) -> dict[str, object]:
    return {"ops": {"run_integration_sync": {"config": {"sync_id": sync_id}}}}
