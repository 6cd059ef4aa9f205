"""One sync, from its queued row to its end: the body of `integration_sync_job` and of
`flokit refresh`'s sync step.

The row is claimed (`queued` -> `running`, the integration `syncing`) in one transaction; the
connector then pulls and writes through a `SyncTarget`; the end (status, counts, the
connector's state, the `integration.error` event) commits in one more. A `SyncFailure` is the
provider's verdict and ends the sync as such. Any other exception is ours: the sync is marked
failed with the exception's text and the exception propagates, so the run fails in the Dagster
UI with its stack trace too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from clients.egress import Egress, check_config
from orchestration.syncs.connectors import connector_for
from transforms.integrations.errors import SyncFailure
from transforms.integrations.kinds import ConfigProblem, ValidConfig, kind_of
from transforms.sealing import SealError
from transforms.webhooks.urls import InvalidUrl
from warehouse.db import Database, utcnow
from warehouse.integrations import repository as repo
from warehouse.integrations.target import SyncTarget
from warehouse.lake import Lake


@dataclass(frozen=True)
class SyncOutcome:
    sync_id: str
    integration_id: str
    integration_type: str
    workspace_id: str
    status: str  # succeeded | failed
    records: int
    error_code: str | None = None
    error_message: str | None = None


def execute_sync(
    database: Database,
    lake: Lake,
    instance_key: str,
    sync_id: str,
    run_id: str,
    log: Callable[[str], None] = lambda _line: None,
    now: Callable[[], datetime] = utcnow,
) -> SyncOutcome | None:
    """Run one queued sync to its end; None when it is no longer queued (nothing to do)."""
    try:
        with database.write() as conn:
            started = repo.start_sync(conn, sync_id=sync_id, run_id=run_id, instance_key=instance_key, now=now())
    except SealError as exc:
        with database.write() as conn:
            sync = repo.finish_failure(
                conn,
                sync_id=sync_id,
                code="config",
                message=f"the stored credentials cannot be unsealed with this instance key ({exc}); "
                "connect the integration again",
                refused=True,
                now=now(),
            )
        return _outcome(sync, "", "")
    if started is None:
        log(f"sync {sync_id} is not queued any more; nothing to do")
        return None
    integration = started.integration
    target = SyncTarget(
        database=database,
        lake=lake,
        workspace_id=integration.workspace_id,
        integration_id=integration.id,
        integration_type=integration.type,
        state=started.state,
        now=now(),
        instance_key=instance_key,
    )
    log(f"sync {sync_id}: {integration.type} integration {integration.id} of workspace {integration.workspace_id}")
    try:
        check_addresses(integration.type, started.config)
        connector = connector_for(integration.type)
        connector.sync(connector.client(started.config), target, started.config, log)
    except (SyncFailure, InvalidUrl) as error:
        failure = error if isinstance(error, SyncFailure) else SyncFailure("config", str(error))
        log(f"sync {sync_id} failed ({failure.code}): {failure.message}")
        with database.write() as conn:
            sync = repo.finish_failure(
                conn,
                sync_id=sync_id,
                code=failure.code,
                message=failure.message,
                refused=failure.refused,
                records=target.records,
                now=now(),
            )
        return _outcome(sync, integration.type, integration.workspace_id)
    except BaseException as exc:
        with database.write() as conn:
            repo.finish_failure(
                conn,
                sync_id=sync_id,
                code=None,
                message=f"the sync crashed: {type(exc).__name__}: {exc}",
                refused=False,
                records=target.records,
                now=now(),
            )
        raise
    with database.write() as conn:
        sync = repo.finish_success(
            conn, sync_id=sync_id, records=target.records, earliest=target.earliest, state=target.state, now=now()
        )
    log(
        f"sync {sync_id} succeeded: {target.records} record(s) written, {target.duplicates} already landed, "
        f"{target.skipped_settled} older than the high-water mark"
    )
    return _outcome(sync, integration.type, integration.workspace_id)


def check_addresses(integration_type: str, config: ValidConfig) -> None:
    """The config's addresses under this process's egress policy (`clients.egress`), checked
    again as each sync starts: DNS may have changed since the integration was connected, and the
    SDK clients (boto3, Snowflake, Google's) open connections the policy cannot see."""
    try:
        check_config(kind_of(integration_type).all_fields(), config, Egress.from_env())
    except ConfigProblem as problem:
        raise SyncFailure("config", str(problem)) from None


def _outcome(sync: repo.Sync, integration_type: str, workspace_id: str) -> SyncOutcome:
    return SyncOutcome(
        sync_id=sync.id,
        integration_id=sync.integration_id,
        integration_type=integration_type,
        workspace_id=workspace_id or sync.workspace_id,
        status=sync.status,
        records=sync.records_written,
        error_code=sync.error_code,
        error_message=sync.error_message,
    )
