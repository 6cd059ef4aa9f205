"""Fixtures: database tests run on SQLite, and on PostgreSQL where the database is the point.

Which tests run on both backends (docs/testing.md): every test under tests/warehouse (the
repository functions, constraints, migrations), and every test marked `both_backends` (a race, a
lock, an outage, a connection the server ends), each with its reason beside the mark. The
PostgreSQL twin of any other parametrized test (HTTP, CLI, browser, process level) is deselected:
its SQL is the warehouse's, already proven on PostgreSQL, and running it twice cost a third of the
suite. `pytest --all-backends` runs every twin, as the suite did before.

PostgreSQL comes from `scripts/with-postgres.sh` (which `make test` uses) through
FLOKIT_TEST_POSTGRES_URL. Each test gets a fresh database cloned from a migrated template
(`CREATE DATABASE ... TEMPLATE`, or a copied SQLite file), so tests are isolated and migrations
run once per session, not once per test.
"""

from __future__ import annotations

import faulthandler
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from flask import Flask
from flask.testing import FlaskClient

from api.app import create_app
from tests.support import built_once, demo_world
from tests.support.databases import fresh_database_url, libpq, with_dbname
from tests.support.objects import s3_environment
from tests.support.up import build_world, copy_world
from warehouse import migrate
from warehouse.bootstrap import bootstrap
from warehouse.db import Database, database_for
from warehouse.lake import Lake, LocalLake
from warehouse.lake_cache import LakeCache
from warehouse.object_lake import ObjectLake
from warehouse.objects import ObjectStore
from warehouse.settings import INTEGRATIONS_PRIVATE_HOSTS_ENV, Settings

PG_URL_ENV = "FLOKIT_TEST_POSTGRES_URL"
REDIS_URL_ENV = "FLOKIT_TEST_REDIS_URL"
# The fake providers listen on 127.0.0.1: integrations may call it, in this process (the sync
# clients read the policy from the environment) and in every `flokit` process a test starts with
# os.environ. Tests of the policy itself remove it (tests/orchestration/syncs/test_egress.py).
LOCAL_HOSTS = "127.0.0.1,localhost"
os.environ.setdefault(INTEGRATIONS_PRIVATE_HOSTS_ENV, LOCAL_HOSTS)


WAREHOUSE_TESTS = Path(__file__).resolve().parent / "warehouse"


TIMELINE = os.environ.get("FLOKIT_TEST_TIMELINE")  # a file: one line per test, for docs/testing.md


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """With FLOKIT_TEST_TIMELINE=<file>, append `worker<TAB>start<TAB>end<TAB>cpu<TAB>children cpu
    <TAB>test id` for each test (setup and teardown included; epoch seconds, then CPU seconds, user
    plus system, of the worker and of the processes it started and reaped): which worker ran what
    when, so the end of a run can be read (a tail of one slow module on one worker) as the totals
    cannot show it, and what each test costs the cores, which is what a CPU-bound suite runs out of."""
    started, cpu = time.time(), os.times()
    try:
        return (yield)
    finally:
        if TIMELINE:
            worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
            now = os.times()
            own = now.user + now.system - cpu.user - cpu.system
            children = now.children_user + now.children_system - cpu.children_user - cpu.children_system
            with open(TIMELINE, "a") as out:  # one short line per write: appends do not interleave
                out.write(f"{worker}\t{started:.1f}\t{time.time():.1f}\t{own:.2f}\t{children:.2f}\t{item.nodeid}\n")


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadscope` with the longest modules first, process-level and in-process ones
    interleaved (tests/scheduling.py); every other mode is xdist's own."""
    if config.getvalue("dist") != "loadscope":
        return None
    from tests.scheduling import InterleavedLongestFirst

    return InterleavedLongestFirst(config, log)


# Seconds an xdist worker may take to exit after its last test before it prints every thread's
# stack and ends itself: a worker stuck in an exit hook (a thread's join, an atexit writer) would
# otherwise hold the run until CI's limit with nothing to say where (stop 38's submission).
WORKER_EXIT_S = 120


def pytest_unconfigure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        faulthandler.dump_traceback_later(WORKER_EXIT_S, exit=True)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-slow",
        action="store_true",
        help="also run the long scenarios (marked slow: `make faults`, `make cluster-test`)",
    )
    parser.addoption(
        "--all-backends",
        action="store_true",
        help="also run the PostgreSQL twin of every parametrized test, not only tests/warehouse and `both_backends`",
    )


def is_postgres_twin(item: pytest.Item) -> bool:
    """A parametrized test's PostgreSQL case (a backend param "postgres"), as opposed to a test
    that exists only on PostgreSQL (marked `postgres` with no SQLite case), which always runs."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return False
    return any(isinstance(value, str) and value == "postgres" for value in callspec.params.values())


def runs_on_both_backends(item: pytest.Item) -> bool:
    mark = item.get_closest_marker("both_backends")
    if mark is not None and not mark.kwargs.get("reason"):
        raise pytest.UsageError(f"{item.nodeid}: both_backends needs reason=... (why the database is the point)")
    return WAREHOUSE_TESTS in item.path.parents or mark is not None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """PostgreSQL twins run where the database is the point; long fault scenarios only when asked."""
    if not config.getoption("--all-backends"):
        kept, twins = [], []
        for item in items:
            (twins if is_postgres_twin(item) and not runs_on_both_backends(item) else kept).append(item)
        if twins:
            config.hook.pytest_deselected(items=twins)
            items[:] = kept
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="a long scenario: run with --run-slow (make faults, make cluster-test)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def xdist_worker_number() -> int:
    """0 for the first pytest-xdist worker (gw0) and for a run without workers, 1 for gw1, ..."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(worker.removeprefix("gw") or 0)


@pytest.fixture(scope="session")
def postgres_admin_url() -> str:
    url = os.environ.get(PG_URL_ENV)
    if not url:
        if os.environ.get("FLOKIT_TEST_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"{PG_URL_ENV} is not set; run the suite through scripts/with-postgres.sh")
        pytest.skip(f"PostgreSQL tests need {PG_URL_ENV} (make test starts a cluster)")
    return url


S3_ENDPOINT_ENV = "FLOKIT_TEST_S3_ENDPOINT"


@pytest.fixture
def s3_url(monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh prefix in the bucket of `scripts/with-s3.sh` (a real SeaweedFS, which `make test`
    starts), with the standard AWS variables set for this process and the ones it starts."""
    endpoint = os.environ.get(S3_ENDPOINT_ENV)
    if not endpoint:
        if os.environ.get("FLOKIT_TEST_REQUIRE_S3") == "1":
            pytest.fail(f"{S3_ENDPOINT_ENV} is not set; run the suite through scripts/with-s3.sh")
        pytest.skip(f"object-store tests need {S3_ENDPOINT_ENV} (make test starts a server)")
    for name, value in s3_environment().items():
        monkeypatch.setenv(name, value)
    return f"s3://{os.environ['FLOKIT_TEST_S3_BUCKET']}/t-{uuid.uuid4().hex[:12]}"


@pytest.fixture(params=["local", "s3", "s3-cached"])
def any_lake(request: pytest.FixtureRequest, tmp_path: Path) -> Lake:
    """The lake on local disk, then in an object store (read directly, and through a host's
    cache): one contract, two homes (warehouse/lake.py)."""
    if request.param == "local":
        return LocalLake(tmp_path / "lake")
    store = ObjectStore(request.getfixturevalue("s3_url"))
    cache = LakeCache(store, tmp_path / "cache") if request.param == "s3-cached" else None
    return ObjectLake(store, cache=cache)


@pytest.fixture
def redis_url() -> str:
    """The private Redis of `scripts/with-redis.sh` (which `make test` uses), emptied for this test.

    Each pytest-xdist worker has a logical database of its own (gw0 uses 1, gw1 uses 2, ...), so
    one worker's FLUSHDB never empties the counters of a test running on another."""
    base = os.environ.get(REDIS_URL_ENV)
    if not base:
        if os.environ.get("FLOKIT_TEST_REQUIRE_REDIS") == "1":
            pytest.fail(f"{REDIS_URL_ENV} is not set; run the suite through scripts/with-redis.sh")
        pytest.skip(f"Redis tests need {REDIS_URL_ENV} (make test starts a server)")
    import redis

    url = base.rsplit("/", 1)[0] + f"/{1 + xdist_worker_number()}"

    client = redis.Redis.from_url(url)
    client.flushdb()
    client.close()
    return url


@pytest.fixture(scope="session")
def postgres_template(postgres_admin_url: str) -> Iterator[str]:
    name = f"flokit_tpl_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(libpq(postgres_admin_url), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = with_dbname(postgres_admin_url, name)
    db = Database(url)
    migrate.upgrade(db)
    db.dispose()  # a template database must have no open connections
    yield name
    with psycopg.connect(libpq(postgres_admin_url), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sqlite-template") / "flokit.db"
    db = Database(f"sqlite:///{path}")
    migrate.upgrade(db)
    with db.engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    db.dispose()
    return path


@pytest.fixture(scope="session")
def demo_world_root(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> Path:
    """The populated demo world (tests/support/demo_world.py: `flokit demo seed` at `flokit up`'s size,
    refresh, walkthrough), built once per run on SQLite. pytest-xdist's workers share it through the
    run's common temporary directory (`built_once`): the first to need it builds it, the others wait
    for it and then only copy it (`tests.support.demo_world.copy_world`)."""
    return built_once(tmp_path_factory, "demo-world", lambda root: demo_world.build_world(root, sqlite_template))


@pytest.fixture(scope="session")
def up_world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated data directory with its Dagster instance at head, built once per worker; tests
    take a copy (`up_data_dir`), never this one."""
    return build_world(tmp_path_factory.mktemp("up-world") / "data")


@pytest.fixture
def up_data_dir(up_world: Path, tmp_path: Path) -> Path:
    """The test's own copy of `up_world` for a `flokit up` whose point is not the first start."""
    return copy_world(up_world, tmp_path / "data")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A freshly migrated, empty operational database on each backend."""
    yield from fresh_database_url(request, request.param, tmp_path)


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", database_url=database_url)


@pytest.fixture
def db(settings: Settings) -> Database:
    return database_for(settings.database_url)


@pytest.fixture
def app(settings: Settings) -> Flask:
    return create_app(settings)


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture
def workspace(db: Database) -> dict[str, Any]:
    """A bootstrapped workspace: ids and the keys, as `flokit admin bootstrap --json` prints them."""
    with db.write() as conn:
        return bootstrap(conn, name="Acme Fitness")
