"""The data directory is owner-only (0700) and the SQLite files 0600, whatever the umask: they
hold the webhook signing secrets. A fresh directory is created so through the CLI; an existing,
looser one is tightened by `flokit db upgrade` and `flokit up`, which say what they changed."""

import json
import os
import sqlite3
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests

from tests.support import http_ok, wait_for
from tests.support.cli import Ran, flokit_in_process
from tests.support.up import flokit_up

pytestmark = pytest.mark.e2e


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@contextmanager
def umask(value: int) -> Iterator[None]:
    old = os.umask(value)
    try:
        yield
    finally:
        os.umask(old)


def flokit(data_dir: Path, *args: str) -> Ran:
    """The CLI (in-process) with SQLite in `data_dir` under a permissive umask (022), as many shells have."""
    env = {**os.environ, "FLOKIT_DATA_DIR": str(data_dir)}
    env.pop("DAGSTER_HOME", None)
    env.pop("FLOKIT_DATABASE_URL", None)
    with umask(0o022):
        return flokit_in_process(env, *args)


def test_a_fresh_data_dir_is_created_owner_only(tmp_path: Path) -> None:
    data = tmp_path / "new" / "data"
    result = flokit(data, "db", "upgrade", "--json")
    assert result.returncode == 0, result.stderr
    assert mode(data) == 0o700
    files = sorted(data.glob("flokit.db*"))
    assert data / "flokit.db" in files
    assert {f.name: mode(f) for f in files} == {f.name: 0o600 for f in files}
    assert json.loads(result.stdout)["tightened"] == []  # nothing to tighten: created right


def test_an_existing_loose_data_dir_is_tightened_by_db_upgrade(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert flokit(data, "db", "upgrade").returncode == 0
    db = data / "flokit.db"
    # Another process holds the database open, so its -wal and -shm files exist; an older
    # FloKit (or a copy) left everything readable by group and others.
    reader = sqlite3.connect(db)
    try:
        reader.execute("PRAGMA journal_mode=WAL")
        reader.execute("CREATE TABLE IF NOT EXISTS probe (x)")
        reader.commit()
        loose = [db, db.with_name("flokit.db-wal"), db.with_name("flokit.db-shm")]
        for path in loose:
            path.chmod(0o644)
        data.chmod(0o755)
        result = flokit(data, "db", "upgrade", "--json")
        assert result.returncode == 0, result.stderr
        tightened = json.loads(result.stdout)["tightened"]
        assert sorted(tightened) == sorted([f"{data}: 0755 -> 0700", *(f"{path}: 0644 -> 0600" for path in loose)])
        assert all(f"tightened permissions of {line}" in result.stderr for line in tightened)
        assert mode(data) == 0o700 and [mode(p) for p in loose] == [0o600] * 3
    finally:
        reader.close()
    assert json.loads(flokit(data, "db", "upgrade", "--json").stdout)["tightened"] == []  # once is enough


def test_flokit_up_creates_and_keeps_the_data_dir_owner_only(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with umask(0o022), flokit_up(data) as up:
        wait_for(http_ok(f"{up.api}/healthz"), 180, "API", up.process)
        key = {"Authorization": "Bearer flk_" + "a" * 52}  # looked up: the worker keeps a connection open

        def database_in_use() -> bool:
            assert requests.get(f"{up.api}/v1/workspace", headers=key, timeout=10).status_code == 401
            return (data / "flokit.db-wal").exists() and (data / "flokit.db-shm").exists()

        wait_for(database_in_use, 180, "the API worker's open database (-wal, -shm)", up.process)
        assert mode(data) == 0o700
        files = sorted(data.glob("flokit.db*"))
        assert {"flokit.db", "flokit.db-wal", "flokit.db-shm"} <= {f.name for f in files}
        assert {f.name: mode(f) for f in files} == {f.name: 0o600 for f in files}
        assert mode(data / "app-session.secret") == 0o600
    # Loosened behind its back, the next start tightens it again and says so.
    data.chmod(0o755)
    (data / "flokit.db").chmod(0o640)
    with umask(0o022), flokit_up(data, log_name="up2.log") as up:
        wait_for(http_ok(f"{up.api}/healthz"), 180, "API", up.process)
        assert mode(data) == 0o700 and mode(data / "flokit.db") == 0o600
        output = up.output()
    assert f"tightened permissions of {data}: 0755 -> 0700" in output
    assert f"tightened permissions of {data / 'flokit.db'}: 0640 -> 0600" in output


def test_db_upgrade_creates_the_instance_key_once_owner_only(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = flokit(data, "db", "upgrade", "--json")
    assert first.returncode == 0, first.stderr
    key = data / "instance.key"
    assert json.loads(first.stdout)["instance_key"] == str(key)
    assert mode(key) == 0o600 and len(key.read_text().strip()) >= 43
    content = key.read_text()
    assert flokit(data, "db", "upgrade").returncode == 0
    assert key.read_text() == content  # never replaced: every sealed secret depends on it


def test_flokit_secret_key_replaces_the_file_and_a_short_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    monkeypatch.setenv("FLOKIT_SECRET_KEY", "k" * 43)
    result = flokit(data, "db", "upgrade", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["instance_key"] == "FLOKIT_SECRET_KEY"
    assert not (data / "instance.key").exists()
    monkeypatch.setenv("FLOKIT_SECRET_KEY", "short")
    refused = flokit(data, "db", "upgrade")
    assert refused.returncode != 0 and "FLOKIT_SECRET_KEY must be at least 43 characters" in refused.stderr
