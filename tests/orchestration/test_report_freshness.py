"""The published reports' freshness: a check that fails once they are older than 6 hours plus the
grace, evaluated on its own when its sensor sees them outgrow it (on the dev instance's storage)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from orchestration.definitions import build_definitions
from orchestration.reports.checks import GRACE, MAX_AGE, REFRESH_EVERY
from orchestration.reports.sensors import published_reports_freshness_sensor
from orchestration.resources import DataDirResource
from tests.support import ROOT
from warehouse.reports import serving
from warehouse.settings import Settings


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", database_url=f"sqlite:///{tmp_path / 'unused.db'}")


@pytest.fixture
def instance(tmp_path: Path) -> Iterator[dg.DagsterInstance]:
    """An instance configured like `flokit up`'s (SQLite storages under DAGSTER_HOME)."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copyfile(ROOT / "orchestration" / "instance" / "dagster.dev.yaml", home / "dagster.yaml")
    with dg.DagsterInstance.from_config(str(home)) as instance:
        yield instance


def publish(settings: Settings, age: timedelta) -> datetime:
    generated_at = datetime.now(UTC) - age
    serving.publish(settings.paths.reports, settings.paths.lake(), generated_at=generated_at, as_of=None)
    return generated_at


def evaluate(settings: Settings, instance: dg.DagsterInstance) -> dg.AssetCheckEvaluation:
    """What a run requested by the freshness sensor does: the check alone."""
    job = build_definitions(settings).resolve_job_def("published_reports_freshness_job")
    result = job.execute_in_process(instance=instance)
    assert result.success  # a failed freshness check warns; the run itself succeeds
    (evaluation,) = result.get_asset_check_evaluations()
    assert evaluation.check_name == "published_reports_fresh"
    return evaluation


def test_the_check_fails_for_stale_reports_and_passes_for_fresh_ones(
    settings: Settings, instance: dg.DagsterInstance
) -> None:
    assert timedelta(0) < GRACE and MAX_AGE == REFRESH_EVERY + GRACE
    never = evaluate(settings, instance)
    assert not never.passed and never.description == "never published"

    publish(settings, MAX_AGE + timedelta(minutes=5))
    stale = evaluate(settings, instance)
    assert not stale.passed and stale.severity == dg.AssetCheckSeverity.WARN
    assert stale.metadata["age_seconds"].value > MAX_AGE.total_seconds()

    publish(settings, REFRESH_EVERY + GRACE / 2)  # late, but within the grace
    assert evaluate(settings, instance).passed
    publish(settings, timedelta(0))
    assert evaluate(settings, instance).passed

    latest = instance.get_latest_asset_check_evaluation_record(
        dg.AssetCheckKey(dg.AssetKey("published_reports"), "published_reports_fresh")
    )
    assert latest is not None and latest.status.value == "SUCCEEDED"  # recorded in the instance, passed


def test_the_sensor_asks_for_the_check_once_the_reports_are_stale(settings: Settings) -> None:
    resources = {"data_dir": DataDirResource(root=str(settings.data_dir))}

    def tick(cursor: str | None = None) -> dg.SensorResult | dg.SkipReason:
        result = published_reports_freshness_sensor(dg.build_sensor_context(cursor=cursor, resources=resources))
        assert isinstance(result, dg.SensorResult | dg.SkipReason)
        return result

    assert isinstance(tick(), dg.SkipReason)  # nothing published: the first-refresh sensor's time
    publish(settings, REFRESH_EVERY)
    assert isinstance(tick(), dg.SkipReason)  # within the grace

    publish(settings, MAX_AGE + timedelta(minutes=1))
    stale = tick()
    assert isinstance(stale, dg.SensorResult) and len(stale.run_requests or []) == 1
    assert isinstance(tick(stale.cursor), dg.SkipReason)  # once per stale store

    publish(settings, timedelta(0))  # the next publish: its refresh run evaluates the check again
    assert isinstance(tick(stale.cursor), dg.SkipReason)


def test_the_check_runs_in_every_refresh_of_the_reports(settings: Settings) -> None:
    repo = build_definitions(settings).get_repository_def()
    key = dg.AssetCheckKey(dg.AssetKey("published_reports"), "published_reports_fresh")
    assert key in repo.get_job("reports_job").asset_layer.asset_graph.asset_check_keys
    sensor = repo.get_sensor_def("published_reports_freshness_sensor")
    assert sensor.job_name == "published_reports_freshness_job"
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
