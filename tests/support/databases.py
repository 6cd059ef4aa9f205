"""A fresh, migrated operational database for a test that builds its own fixture around one.

The conftest's `database_url` fixture uses `fresh_database_url` for both backends; a test module
that needs one backend only, or a database inside a larger fixture, calls it directly (it takes the
conftest's session templates through `request`, so migrations still run once per session).
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from warehouse.db import close_database


def libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def with_dbname(url: str, name: str) -> str:
    return url.rsplit("/", 1)[0] + "/" + name


def fresh_database_url(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Iterator[str]:
    if backend == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        target = tmp_path / "data" / "flokit.db"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(template, target)
        url = f"sqlite:///{target}"
        yield url
        close_database(url)
        return
    admin: str = request.getfixturevalue("postgres_admin_url")
    template_name: str = request.getfixturevalue("postgres_template")
    name = f"flokit_t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(libpq(admin), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_name}"')
    url = with_dbname(admin, name)
    yield url
    close_database(url)
    with psycopg.connect(libpq(admin), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
