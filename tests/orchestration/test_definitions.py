"""The definitions load and validate, and assets materialize for real (SQLite and PostgreSQL)."""

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import dagster as dg
import polars as pl
import psycopg
import pytest

from orchestration.definitions import build_definitions, defs
from orchestration.resources import DatabaseResource, DataDirResource
from orchestration.workspaces.assets import workspaces
from tests.support import ROOT
from warehouse.settings import Settings


def test_definitions_load() -> None:
    repo = defs.get_repository_def()
    assert "workspaces" in {k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()}


def test_dagster_cli_validates_the_workspace(tmp_path: Path) -> None:
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "FLOKIT_DATA_DIR": str(tmp_path / "data")}
    bin_dir = Path(sys.executable).parent
    result = subprocess.run(
        [str(bin_dir / "dagster"), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Validation successful" in result.stdout + result.stderr


def test_workspaces_asset_writes_the_lake(settings: Settings, workspace: dict) -> None:
    result = dg.materialize(
        [workspaces],
        resources={
            "database": DatabaseResource(url=settings.database_url),
            "data_dir": DataDirResource(root=str(settings.data_dir)),
        },
    )
    assert result.success
    frame = pl.read_parquet(settings.paths.lake_dir / "workspaces" / "data.parquet")
    assert frame["workspace_id"].to_list() == [workspace["workspace_id"]]
    materialization = result.asset_materializations_for_node("workspaces")[0]
    assert materialization.metadata["dagster/row_count"].value == 1


@pytest.mark.postgres
def test_materialization_on_a_postgres_backed_instance(
    postgres_admin_url: str, settings: Settings, workspace: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The production instance config (deploy/dagster.yaml, dagster-postgres) runs real materializations."""
    dsn = postgres_admin_url.replace("postgresql+psycopg://", "postgresql://")
    name = f"dagster_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        home = tmp_path / "dagster_home"
        home.mkdir()
        shutil.copyfile(ROOT / "deploy" / "dagster.yaml", home / "dagster.yaml")
        pg_url = dsn.replace("postgresql://", "postgresql+psycopg2://", 1).rsplit("/", 1)[0] + "/" + name
        monkeypatch.setenv("DAGSTER_PG_URL", pg_url)
        with dg.DagsterInstance.from_config(str(home)) as instance:
            assert type(instance.run_storage).__name__ == "PostgresRunStorage"
            definitions = build_definitions(settings)
            job = definitions.resolve_implicit_global_asset_job_def()
            # Only the unpartitioned asset: daily-partitioned assets (reports) need a partition key.
            result = job.execute_in_process(instance=instance, asset_selection=[dg.AssetKey("workspaces")])
            assert result.success
            record = instance.get_latest_materialization_event(dg.AssetKey("workspaces"))
            assert record is not None
        with psycopg.connect(dsn.rsplit("/", 1)[0] + "/" + name) as conn:
            (runs,) = conn.execute("SELECT count(*) FROM runs WHERE status = 'SUCCESS'").fetchone()
        assert runs == 1
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_domains_read_no_settings_only_the_composition_root_does(tmp_path: Path) -> None:
    """A domain's `defs` is static: with settings that cannot load, every domain still imports,
    and only the composition root (the one settings load) refuses them."""
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    env = {**os.environ, "FLOKIT_DATA_DIR": str(not_a_dir)}
    domains = ["catalog", "events", "reports", "spend", "webhooks", "workspaces"]
    imports = "; ".join(f"import orchestration.{domain}.definitions" for domain in domains)
    ok = subprocess.run([sys.executable, "-c", imports], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stderr
    root = subprocess.run(
        [sys.executable, "-c", "import orchestration.definitions"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert root.returncode != 0 and "FLOKIT_DATA_DIR must be a directory" in root.stderr


def test_a_database_url_from_the_environment_is_bound_as_an_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Dagster UI shows resource values: a PostgreSQL URL (with its password) stays an EnvVar."""
    monkeypatch.setenv("FLOKIT_DATABASE_URL", "postgresql+psycopg://flokit:secret@db.invalid/flokit")
    url = build_definitions().resources["database"].url
    assert isinstance(url, dg.EnvVar) and url.env_var_name == "FLOKIT_DATABASE_URL"
