"""The Dagster instance FloKit generates for PostgreSQL and Celery loads in Dagster as described.

Real Dagster on a real PostgreSQL database (scripts/with-postgres.sh): the file is written by
`prepare_instance`, opened by `DagsterInstance.from_config`, and its storages are created in the
database's `dagster` schema, beside FloKit's own tables and `alembic_version`, never in them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import psycopg
import pytest

from cli.dagster_instance import DEV_INSTANCE, GENERATED_HEADER, prepare_instance
from orchestration.launcher import FloKitCeleryRunLauncher
from tests.support import wait_for
from tests.support.databases import fresh_database_url, libpq
from warehouse.dagster_storage import PREPARE_LOCK_KEY
from warehouse.settings import Settings

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from fresh_database_url(request, "postgres", tmp_path)


def _settings(tmp_path: Path, pg_url: str, **env: str) -> Settings:
    return Settings.from_env({"FLOKIT_DATA_DIR": str(tmp_path / "data"), "FLOKIT_DATABASE_URL": pg_url, **env})


@pytest.fixture
def restore_environ() -> Iterator[None]:
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.mark.usefixtures("restore_environ")
def test_the_celery_instance_loads_with_the_flokit_launcher_monitoring_and_retries(pg_url: str, tmp_path: Path) -> None:
    settings = _settings(
        tmp_path, pg_url, FLOKIT_RUN_LAUNCHER="celery", FLOKIT_CELERY_BROKER_URL="redis://127.0.0.1:9/1"
    )
    home = tmp_path / "dagster"
    (home).mkdir()
    (home / "dagster.yaml").write_text(DEV_INSTANCE.read_text())  # what `flokit up` left: replaced
    assert prepare_instance(home, settings) == ["at head"]
    text = (home / "dagster.yaml").read_text()
    assert text.startswith(GENERATED_HEADER)
    assert "redis://" not in text and "postgresql" not in text  # secrets only by variable
    with dg.DagsterInstance.from_config(str(home)) as instance:
        launcher = instance.run_launcher
        assert isinstance(launcher, FloKitCeleryRunLauncher)
        assert (launcher.broker, launcher.backend, launcher.default_queue) == (
            "redis://127.0.0.1:9/1",
            "redis://127.0.0.1:9/2",
            "flokit",
        )
        assert launcher.supports_check_run_worker_health and not launcher.supports_resume_run
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        assert instance.run_monitoring_enabled
        assert instance.run_monitoring_settings["poll_interval_seconds"] == 5
        assert instance.run_monitoring_max_resume_run_attempts == 0
        assert instance.run_retries_enabled and instance.run_retries_max_retries == 1
        assert not instance.run_retries_retry_on_asset_or_op_failure
        coordinator = instance.run_coordinator
        assert type(coordinator).__name__ == "QueuedRunCoordinator"
        limits = {limit["key"]: limit["limit"] for limit in coordinator.get_run_queue_config().tag_concurrency_limits}
        assert limits == {"flokit/canonical_events_writer": 1, "flokit/reports_writer": 1, "flokit/provider": 2}
    with psycopg.connect(libpq(pg_url)) as conn:
        schemas = dict(
            conn.execute(
                "SELECT table_schema, count(*) FROM information_schema.tables "
                "WHERE table_name IN ('runs', 'event_logs') GROUP BY table_schema"
            ).fetchall()
        )
        flokit_revisions = conn.execute("SELECT count(*) FROM public.alembic_version").fetchone()
    assert schemas == {"dagster": 2}
    assert flokit_revisions == (1,)


@pytest.mark.usefixtures("restore_environ")
def test_postgresql_alone_generates_an_instance_on_the_default_launcher(pg_url: str, tmp_path: Path) -> None:
    home = tmp_path / "dagster"
    prepare_instance(home, _settings(tmp_path, pg_url))
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert type(instance.run_launcher).__name__ == "DefaultRunLauncher"
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        assert instance.run_monitoring_enabled and not instance.run_retries_enabled
    assert prepare_instance(home, _settings(tmp_path, pg_url)) == ["at head"]


@pytest.mark.usefixtures("restore_environ")
def test_with_the_lake_in_a_bucket_runs_logs_go_to_the_bucket(pg_url: str, tmp_path: Path) -> None:
    home = tmp_path / "dagster"
    settings = _settings(tmp_path, pg_url, FLOKIT_LAKE_URL="s3://acme-lake/flokit/prod")
    prepare_instance(home, settings)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        manager = instance.compute_log_manager
        assert type(manager).__name__ == "S3ComputeLogManager"
        assert manager.inst_data is not None
        assert manager.inst_data.config_dict == {
            "bucket": "acme-lake",
            "prefix": "flokit/prod/compute_logs",
            "skip_empty_files": False,
            "upload_interval": 30,
        }
    local = _settings(tmp_path, pg_url)
    prepare_instance(home, local)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert type(instance.compute_log_manager).__name__ == "LocalComputeLogManager"


@pytest.mark.usefixtures("restore_environ")
def test_hosts_preparing_one_new_database_take_turns(pg_url: str, tmp_path: Path) -> None:
    """Dagster creates its tables as an instance opens, unguarded; three hosts starting at once on a
    new database lost one start in about 70 to a duplicate in PostgreSQL's catalog (measured at
    stop 36, 24 rounds of three). While another host holds the preparation lock, a host waits and creates nothing."""
    settings = _settings(tmp_path, pg_url)
    assert settings.dagster_database_url is not None
    done: list[list[str]] = []
    with psycopg.connect(libpq(pg_url), autocommit=True) as other_host:
        other_host.execute("SELECT pg_advisory_lock(%s)", (PREPARE_LOCK_KEY,))
        host = threading.Thread(target=lambda: done.append(prepare_instance(tmp_path / "dagster", settings)))
        host.start()

        def waiting() -> bool:
            row = other_host.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
            return row.fetchone() == (1,)

        wait_for(waiting, 60, "the host waiting for the preparation lock")
        tables = other_host.execute("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'dagster'")
        assert tables.fetchone() == (0,)
        assert not done
        other_host.execute("SELECT pg_advisory_unlock(%s)", (PREPARE_LOCK_KEY,))
        host.join(timeout=120)
        tables = other_host.execute("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'dagster'")
        created = tables.fetchone()
    assert done == [["at head"]]
    assert created is not None and created[0] > 0


def test_an_operators_own_file_is_kept_and_sqlite_keeps_the_development_file(tmp_path: Path) -> None:
    from cli.dagster_instance import ensure_dagster_home

    sqlite = Settings.from_env({"FLOKIT_DATA_DIR": str(tmp_path / "data")})
    assert ensure_dagster_home(tmp_path / "a", sqlite).read_text() == DEV_INSTANCE.read_text()
    own = tmp_path / "b" / "dagster.yaml"
    own.parent.mkdir()
    own.write_text("telemetry:\n  enabled: false\n")
    pg = Settings.from_env(
        {"FLOKIT_DATA_DIR": str(tmp_path / "data"), "FLOKIT_DATABASE_URL": "postgresql+psycopg://u@h/d"}
    )
    assert ensure_dagster_home(own.parent, pg).read_text() == "telemetry:\n  enabled: false\n"


def test_flokit_up_leaves_the_runs_of_celery_workers_to_the_launcher() -> None:
    """`flokit up`'s dead-run check skips runs with a Celery task: their pid is another host's."""
    from dagster_celery.tags import DAGSTER_CELERY_TASK_ID_TAG

    from orchestration.liveness import CELERY_TASK_TAG

    assert CELERY_TASK_TAG == DAGSTER_CELERY_TASK_ID_TAG
