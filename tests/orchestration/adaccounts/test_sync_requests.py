"""The dashboard's "Sync now" for an ad account, through Dagster for real: a pending request
becomes one run (sensor -> run_key = request id -> `ad_accounts_sync_job` in process on a real
instance), the run writes the registry and ends the request with the counts, or with the
platform's error text; a request whose run died is ended by the failure sensor or the sweep, so
none stays open for good. Both databases."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import dagster as dg
import pytest

from orchestration.adaccounts.jobs import ACCOUNT_TAG, REQUEST_TAG, ad_accounts_sync_job, request_run_config
from orchestration.adaccounts.sensors import (
    MAX_SYNC,
    SYNC_REQUESTS,
    ad_accounts_sync_failure_sensor,
)
from orchestration.resources import DatabaseResource, DataDirResource, InstanceKeyResource
from tests.providers.meta_graph_fake import ACCOUNT, MetaGraphFake
from tests.support.adaccounts import spend
from transforms.adaccounts.kinds import validate_config
from warehouse.adaccounts import repository as accounts
from warehouse.adaccounts import sync_requests as requests
from warehouse.db import Database, utcnow
from warehouse.settings import Settings

KEY = "k" * 43
OPERATOR = "maya@example.com"


@pytest.fixture(autouse=True)
def instance_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLOKIT_SECRET_KEY", KEY)


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.ephemeral() as running:
        yield running


def connect(db: Database, workspace_id: str, platform: str, raw: dict[str, Any]) -> str:
    with db.write() as conn:
        return accounts.connect(
            conn, workspace_id=workspace_id, platform=platform, config=validate_config(platform, raw),
            instance_key=KEY, actor=OPERATOR,
        ).id  # fmt: skip


def ask(db: Database, workspace_id: str, account_id: str) -> requests.SyncRequest:
    with db.write() as conn:
        found, created = requests.request_sync(
            conn, ad_account_id=account_id, workspace_id=workspace_id, requested_by=OPERATOR
        )
    assert created
    return found


def tick(settings: Settings, instance: dg.DagsterInstance) -> dg.SensorResult | dg.SkipReason:
    sensor = SYNC_REQUESTS.request_sensor(5)
    context = dg.build_sensor_context(
        instance=instance, resources={"database": DatabaseResource(url=settings.database_url)}
    )
    result = sensor(context)
    assert isinstance(result, dg.SensorResult | dg.SkipReason)
    return result


def run(settings: Settings, instance: dg.DagsterInstance, request: dg.RunRequest) -> dg.ExecuteInProcessResult:
    """The requested run, executed in process on the instance, as the daemon would launch it."""
    return ad_accounts_sync_job.execute_in_process(
        instance=instance,
        run_config=request.run_config,
        tags=request.tags,
        resources={
            "database": DatabaseResource(url=settings.database_url),
            "data_dir": DataDirResource(root=str(settings.data_dir)),
            "instance_key": InstanceKeyResource(data_dir=str(settings.data_dir)),
        },
        raise_on_error=False,
    )


def get(db: Database, request_id: str) -> requests.SyncRequest:
    with db.read() as conn:
        return requests.get_request(conn, request_id=request_id)


def test_a_sandbox_request_is_launched_once_writes_the_registry_and_ends_with_its_counts(
    settings: Settings, db: Database, workspace: dict, instance: dg.DagsterInstance
) -> None:
    ws = workspace["workspace_id"]
    today = datetime.now(UTC).date()
    spend(settings.paths.lake(), ws, [(today - timedelta(days=d), "meta_broad", "meta_broad_cr1", 100.0) for d in
                                      range(3)] + [(today, "google_uac", "uac_cr1", 40.0)])  # fmt: skip
    account_id = connect(db, ws, "sandbox", {})
    asked = ask(db, ws, account_id)

    first = tick(settings, instance)
    assert isinstance(first, dg.SensorResult)
    [launch] = first.run_requests or []
    assert launch.run_key == asked.id
    assert launch.tags[REQUEST_TAG] == asked.id and launch.tags[ACCOUNT_TAG] == account_id
    assert launch.run_config == request_run_config(asked.id, ws, account_id)
    again = tick(settings, instance)  # a second tick before the run: the same run key (Dagster runs it once)
    assert isinstance(again, dg.SensorResult) and [r.run_key for r in again.run_requests or []] == [asked.id]

    result = run(settings, instance, launch)

    assert result.success
    ended = get(db, asked.id)
    with db.read() as conn:
        registry = {e.name: e for e in accounts.entities(conn, ad_account_id=account_id)}
        account = accounts.get_account_for_operator(conn, ad_account_id=account_id)
    assert set(registry) == {"meta_broad", "meta_broad_cr1", "google_uac", "uac_cr1"}
    assert registry["meta_broad"].daily_budget == 10000 and registry["meta_broad"].report_campaign == "meta_broad"
    assert (ended.status, ended.run_id, ended.error_message) == ("succeeded", result.run_id, None)
    assert ended.started_at is not None and ended.finished_at is not None
    assert (ended.objects_listed, ended.objects_created, ended.objects_removed) == (4, 4, 0)
    assert (ended.mapped_campaigns, ended.mapped_creatives) == (2, 2)
    assert "4 object(s) listed" in (ended.summary or "")
    assert account.status == "connected" and account.last_synced_at is not None
    assert ended.started_at <= account.last_synced_at <= ended.finished_at
    # nothing pending any more: the sensor skips; the run's success left the request as it ended it
    assert isinstance(tick(settings, instance), dg.SkipReason)
    assert get(db, asked.id).status == "succeeded"


def test_a_refused_meta_token_ends_the_request_failed_with_metas_text(
    settings: Settings, db: Database, workspace: dict, instance: dg.DagsterInstance
) -> None:
    ws = workspace["workspace_id"]
    with MetaGraphFake() as meta:
        account_id = connect(
            db, ws, "meta", {"access_token": "EAAG-revoked-token-000", "ad_account_id": ACCOUNT, "base_url": meta.url}
        )
        asked = ask(db, ws, account_id)
        first = tick(settings, instance)
        assert isinstance(first, dg.SensorResult)
        [launch] = first.run_requests or []
        result = run(settings, instance, launch)

    assert result.success  # the platform's refusal is the sync's outcome, not a fault of the run
    ended = get(db, asked.id)
    assert (ended.status, ended.error_code) == ("failed", "auth")
    assert "Error validating access token" in (ended.error_message or "")
    assert "EAAG-revoked" not in (ended.error_message or "")
    assert ended.objects_listed is None and ended.run_id == result.run_id
    with db.read() as conn:
        account = accounts.get_account_for_operator(conn, ad_account_id=account_id)
    assert account.status == "error" and account.last_error == ended.error_message
    assert isinstance(tick(settings, instance), dg.SkipReason)


def test_a_run_that_crashes_before_ending_its_request_is_marked_failed_by_the_failure_sensor(
    settings: Settings, db: Database, workspace: dict, instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No instance key in the run's environment: the op fails before it claims the request."""
    ws = workspace["workspace_id"]
    account_id = connect(db, ws, "sandbox", {})
    asked = ask(db, ws, account_id)
    first = tick(settings, instance)
    assert isinstance(first, dg.SensorResult)
    [launch] = first.run_requests or []
    monkeypatch.delenv("FLOKIT_SECRET_KEY")
    result = run(settings, instance, launch)
    assert not result.success
    assert get(db, asked.id).status == "pending"

    run_record = instance.get_run_by_id(result.run_id)
    assert run_record is not None
    [failure] = instance.all_logs(result.run_id, of_type=dg.DagsterEventType.RUN_FAILURE)
    context = dg.build_run_status_sensor_context(
        sensor_name="ad_accounts_sync_failure_sensor", dagster_instance=instance, dagster_run=run_record,
        dagster_event=failure.dagster_event,  # type: ignore[arg-type]
        resources={"database": DatabaseResource(url=settings.database_url)},
    ).for_run_failure()  # fmt: skip
    ad_accounts_sync_failure_sensor(context)

    ended = get(db, asked.id)
    assert ended.status == "failed" and ended.error_code is None
    assert f"its run {result.run_id} failed" in (ended.error_message or "")
    assert isinstance(tick(settings, instance), dg.SkipReason)  # not launched again


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: adaccounts/repository.py")
def test_the_sweep_ends_requests_whose_run_ended_or_vanished(
    settings: Settings, db: Database, workspace: dict, instance: dg.DagsterInstance
) -> None:
    ws = workspace["workspace_id"]
    canceled_account = connect(db, ws, "sandbox", {})
    canceled = ask(db, ws, canceled_account)
    run_record = instance.create_run_for_job(
        ad_accounts_sync_job,
        run_config=request_run_config(canceled.id, ws, canceled_account),
        tags={REQUEST_TAG: canceled.id},
    )
    instance.report_run_canceled(run_record)
    with MetaGraphFake() as meta:  # a second account whose run was claimed long ago and never ended
        stale_account = connect(db, ws, "meta", {"access_token": "EAAG-x-0123456789", "ad_account_id": ACCOUNT,
                                                 "base_url": meta.url})  # fmt: skip
    stale = ask(db, ws, stale_account)
    with db.write() as conn:
        requests.claim(conn, request_id=stale.id, run_id="run-gone", now=utcnow() - MAX_SYNC - timedelta(minutes=1))
    database = DatabaseResource(url=settings.database_url)

    assert SYNC_REQUESTS.sweep(instance, database) == 2

    first, second = get(db, canceled.id), get(db, stale.id)
    assert first.status == "failed" and f"its run {run_record.run_id} ended (CANCELED)" in (first.error_message or "")
    assert second.status == "failed" and "still running after 2:00:00" in (second.error_message or "")
    assert SYNC_REQUESTS.sweep(instance, database) == 0
    assert isinstance(tick(settings, instance), dg.SkipReason)
