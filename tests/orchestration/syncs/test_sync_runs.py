"""Queued syncs become Dagster runs (sensor -> run_key = sync id -> real job run), and a sync
whose run ended without ending it is swept to `failed`: no sync stays running for good."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from orchestration.resources import DatabaseResource, DataDirResource, InstanceKeyResource
from orchestration.syncs.jobs import PROVIDER_TAG, SYNC_TAG, integration_sync_job, sync_run_config
from orchestration.syncs.sensors import SYNCS
from transforms.integrations.kinds import validate_config
from warehouse.db import Database
from warehouse.integrations import repository as repo
from warehouse.settings import Settings

KEY = "k" * 43


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.ephemeral() as running:
        yield running


def connect(db: Database, workspace_id: str) -> str:
    with db.write() as conn:
        return repo.connect(
            conn,
            workspace_id=workspace_id,
            integration_type="attribution_provider_a",
            config=validate_config("attribution_provider_a", {"api_token": "adjust-token-0123456789abcdef"}),
            instance_key=KEY,
            actor="ops@example.com",
        ).id


def evaluate(settings: Settings, instance: dg.DagsterInstance) -> dg.SensorResult | dg.SkipReason:
    sensor = SYNCS.request_sensor(5)
    context = dg.build_sensor_context(
        instance=instance, resources={"database": DatabaseResource(url=settings.database_url)}
    )
    result = sensor(context)
    assert isinstance(result, dg.SensorResult | dg.SkipReason)
    return result


def test_the_sensor_schedules_a_never_synced_integration_and_requests_one_run_per_sync(
    settings: Settings, db: Database, workspace: dict, instance: dg.DagsterInstance
) -> None:
    integration_id = connect(db, workspace["workspace_id"])
    result = evaluate(settings, instance)
    assert isinstance(result, dg.SensorResult)
    [request] = result.run_requests or []
    with db.read() as conn:
        [sync] = repo.sync_history(conn, integration_id=integration_id)
    assert (sync.trigger, sync.status) == ("scheduled", "queued")
    assert request.run_key == sync.id
    assert request.tags[SYNC_TAG] == sync.id and request.tags[PROVIDER_TAG] == "attribution_provider_a"
    # Evaluated again: the same sync, the same run key (Dagster runs a run key once).
    again = evaluate(settings, instance)
    assert isinstance(again, dg.SensorResult) and [r.run_key for r in again.run_requests or []] == [sync.id]


def test_credentials_sealed_under_another_instance_key_fail_the_sync_as_a_refusal(
    settings: Settings, db: Database, workspace: dict, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    """The instance key file was lost or replaced: the run says so, in the integration's status."""
    integration_id = connect(db, workspace["workspace_id"])
    with db.write() as conn:
        sync, _ = repo.request_sync_for_operator(conn, integration_id=integration_id)
    data_dir = tmp_path / "data"
    data_dir.mkdir(exist_ok=True)
    (data_dir / "instance.key").write_text("x" * 43 + "\n")
    result = integration_sync_job.execute_in_process(
        instance=instance,
        run_config=sync_run_config(sync.id),
        tags={SYNC_TAG: sync.id},
        resources={
            "database": DatabaseResource(url=settings.database_url),
            "data_dir": DataDirResource(root=str(data_dir)),
            "instance_key": InstanceKeyResource(data_dir=str(data_dir)),
        },
    )
    assert result.success
    with db.read() as conn:
        ended = repo.get_sync(conn, sync_id=sync.id)
        integration = repo.get_integration_for_operator(conn, integration_id=integration_id)
    assert (ended.status, ended.error_code) == ("failed", "config")
    assert integration.status == "error" and "cannot be unsealed" in (integration.error_message or "")


def test_a_sync_whose_run_was_canceled_is_swept_to_failed(
    settings: Settings, db: Database, workspace: dict, instance: dg.DagsterInstance
) -> None:
    integration_id = connect(db, workspace["workspace_id"])
    with db.write() as conn:
        sync, _ = repo.request_sync_for_operator(conn, integration_id=integration_id)
    run = instance.create_run_for_job(
        integration_sync_job, run_config=sync_run_config(sync.id), tags={SYNC_TAG: sync.id}
    )
    instance.report_run_canceled(run)
    assert SYNCS.sweep(instance, DatabaseResource(url=settings.database_url)) == 1
    with db.read() as conn:
        ended = repo.get_sync(conn, sync_id=sync.id)
        integration = repo.get_integration_for_operator(conn, integration_id=integration_id)
    assert ended.status == "failed" and ended.error_code is None
    assert f"its run {run.run_id} ended (CANCELED)" in (ended.error_message or "")
    assert integration.status == "connected"
    assert SYNCS.sweep(instance, DatabaseResource(url=settings.database_url)) == 0


def test_a_running_sync_whose_run_is_not_in_the_instance_is_swept_to_failed(
    settings: Settings, db: Database, workspace: dict, instance: dg.DagsterInstance
) -> None:
    """Its run vanished (a new Dagster instance): nothing will ever end the sync otherwise."""
    integration_id = connect(db, workspace["workspace_id"])
    with db.write() as conn:
        sync, _ = repo.request_sync_for_operator(conn, integration_id=integration_id)
        assert repo.start_sync(conn, sync_id=sync.id, run_id="run-of-another-instance", instance_key=KEY)
    assert SYNCS.sweep(instance, DatabaseResource(url=settings.database_url)) == 1
    with db.read() as conn:
        ended = repo.get_sync(conn, sync_id=sync.id)
        integration = repo.get_integration_for_operator(conn, integration_id=integration_id)
    assert ended.status == "failed"
    assert "its run run-of-another-instance is not in the Dagster instance" in (ended.error_message or "")
    assert integration.status == "connected"
