"""The planted-truth world, shared by tests/e2e/test_planted_truth.py and test_actions_demo.py.

Four workspaces seeded with `flokit demo seed --truth-out` (seeds 1, 2 and 3 of the default world,
and seed 4 with `--no-signal`, the A/A world), 3000 users over 60 days each, then one `flokit
refresh` (the real Dagster runs: events, reports, the actions engine, the catalog). Both modules only
read it, so on SQLite it is built once per run (`tests.support.built_once`, about a minute) and
each module gets its own copy by file; on PostgreSQL (`--all-backends`) each module builds its own.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from tests.support import built_once
from tests.support.cli import flokit_in_process
from tests.support.databases import fresh_database_url
from warehouse.db import close_database, database_for
from warehouse.settings import Settings
from warehouse.workspaces import create_key, create_workspace

USERS, DAYS = 3000, 60  # the smallest demo whose story stands out of the noise (flokit up seeds 8000)
SEEDS = (1, 2, 3)
NO_SIGNAL_SEED = 4
WORLD_FILE = "world.json"


@dataclass(frozen=True)
class Seeded:
    workspace_id: str
    key: str  # a read-only API key
    truth: dict[str, Any]  # the --truth-out file
    first_day: date
    last_day: date


@dataclass(frozen=True)
class TruthWorld:
    settings: Settings
    workspaces: dict[int, Seeded]


def _flokit(settings: Settings, *args: str) -> Any:
    done = flokit_in_process({**os.environ, **settings.child_env()}, *args, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def _build(settings: Settings, truth_dir: Path) -> dict[int, dict[str, Any]]:
    """Seed the four workspaces and refresh once; {seed: Seeded's fields as JSON}."""
    db = database_for(settings.database_url)
    seeded: dict[int, dict[str, Any]] = {}
    for seed in (*SEEDS, NO_SIGNAL_SEED):
        with db.write() as conn:
            ws = create_workspace(conn, name=f"Truth {seed}")
            key = create_key(conn, workspace_id=ws.id, scope="read_only").api_key
        truth_file = truth_dir / f"truth-{seed}.json"
        args = ["--workspace", ws.id, "--users", str(USERS), "--days", str(DAYS), "--seed", str(seed)]
        args += ["--truth-out", str(truth_file), *(["--no-signal"] if seed == NO_SIGNAL_SEED else [])]
        result = _flokit(settings, "demo", "seed", *args)
        assert result["sandbox_ad_account_id"].startswith("adacct_")  # the engine's proposals need one
        seeded[seed] = {
            "workspace_id": ws.id,
            "key": key,
            "truth": json.loads(truth_file.read_text()),
            "first_day": result["first_day"],
            "last_day": result["last_day"],
        }
    runs = _flokit(settings, "refresh")["runs"]
    assert "actions_engine" in [r["name"] for r in runs] and all(r["success"] for r in runs), runs
    return seeded


def _world(settings: Settings, made: dict[str, dict[str, Any]]) -> TruthWorld:
    workspaces = {
        int(seed): Seeded(
            s["workspace_id"],
            s["key"],
            s["truth"],
            date.fromisoformat(s["first_day"]),
            date.fromisoformat(s["last_day"]),
        )
        for seed, s in made.items()
    }
    return TruthWorld(settings, workspaces)


def _build_sqlite(root: Path, template: Path) -> None:
    data_dir = root / "data"
    data_dir.mkdir()
    shutil.copyfile(template, data_dir / "flokit.db")
    url = f"sqlite:///{data_dir / 'flokit.db'}"
    try:
        made = _build(Settings(data_dir=data_dir, database_url=url), root)
        with database_for(url).engine.connect() as conn:  # the whole database in the one file
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        close_database(url)
    (root / WORLD_FILE).write_text(json.dumps(made))


@contextmanager
def truth_world(request: pytest.FixtureRequest, tmp: Path) -> Iterator[TruthWorld]:
    """The world on `request.param`'s database, in `tmp`: a copy of the run's on SQLite, built
    here on PostgreSQL."""
    if request.param == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        root = built_once(
            request.getfixturevalue("tmp_path_factory"), "truth-world", lambda r: _build_sqlite(r, template)
        )
        shutil.copytree(root / "data", tmp / "data")
        url = f"sqlite:///{tmp / 'data' / 'flokit.db'}"
        try:
            yield _world(Settings(data_dir=tmp / "data", database_url=url), json.loads((root / WORLD_FILE).read_text()))
        finally:
            close_database(url)
        return
    urls = fresh_database_url(request, request.param, tmp)
    settings = Settings(data_dir=tmp / "data", database_url=next(urls))
    yield _world(settings, {str(k): v for k, v in _build(settings, tmp).items()})
    with pytest.raises(StopIteration):
        next(urls)
