"""Dagster runs on Celery workers, end to end: `flokit serve daemon` and two `flokit serve worker`
on one PostgreSQL and one Redis (scripts/with-postgres.sh, scripts/with-redis.sh), each "host" with
its own data directory and DAGSTER_HOME (they share the database, the broker and the checkout).

Runs are submitted as an operator would: `flokit refresh` from a host with no role, and its
`through_queue` on the daemon's host (the run queue, then the daemon's launcher). The slow
run is made slow by a real lock: the test holds an ACCESS EXCLUSIVE lock on the table the dedup
pruning deletes from, so the run waits in PostgreSQL until the test lets it go.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import psutil
import psycopg
import pytest
import requests

from orchestration.launcher import WORKER_TAG
from orchestration.liveness import PROCESS_TAG
from orchestration.submit import through_queue
from tests.support import BIN, ROOT, free_port, wait_for
from tests.support.cluster import (
    Host,
    Role,
    flokit,
    fresh_redis_databases,
    host,
    instance_of,
    serve,
    xdist_worker_number,
)
from tests.support.databases import fresh_database_url, libpq

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.deployment]

REDIS_URL_ENV = "FLOKIT_TEST_REDIS_URL"  # scripts/with-redis.sh


JOB = "prune_dedup_claims_job"


@pytest.fixture(scope="module")
def cluster_env(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """One PostgreSQL database and Redis databases of their own for the module's deployment."""
    base = os.environ.get(REDIS_URL_ENV)
    if not base:
        if os.environ.get("FLOKIT_TEST_REQUIRE_REDIS") == "1":
            pytest.fail(f"{REDIS_URL_ENV} is not set; run the suite through scripts/with-redis.sh")
        pytest.skip(f"Celery tests need {REDIS_URL_ENV} (scripts/with-redis.sh)")
    # Beside the rate-limit tests' databases (conftest: 1 + the pytest worker's number).
    broker, _results = fresh_redis_databases(8 + 2 * xdist_worker_number(), 2)
    urls = fresh_database_url(request, "postgres", tmp_path_factory.mktemp("db"))
    env = {
        **os.environ,
        "FLOKIT_DATABASE_URL": next(urls),
        "FLOKIT_RUN_LAUNCHER": "celery",
        "FLOKIT_CELERY_BROKER_URL": broker,
        "FLOKIT_SECRET_KEY": "k" * 48,
    }
    env.pop("DAGSTER_HOME", None)
    env.pop("FLOKIT_CELERY_RESULT_URL", None)
    yield env
    with pytest.raises(StopIteration):
        next(urls)


@dataclass
class Cluster:
    root: Path
    env: dict[str, str]
    daemon: Role
    workers: dict[str, Role]

    def host(self, name: str) -> Host:
        return host(self.root, name, self.env)


@pytest.fixture(scope="module")
def cluster(cluster_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """`flokit serve daemon` and two `flokit serve worker` (one pool process each), all ready."""
    root = tmp_path_factory.mktemp("cluster")
    with ExitStack() as stack:
        daemon = stack.enter_context(serve(host(root, "daemon-host", cluster_env), "daemon"))
        workers = {
            f"w{n}": stack.enter_context(
                serve(host(root, f"worker-host-{n}", cluster_env), "worker", "--name", f"w{n}", "-c", "1")
            )
            for n in (1, 2)
        }
        for role in (daemon, *workers.values()):
            role.wait_ready()
        yield Cluster(root, cluster_env, daemon, workers)


def runs(instance: dg.DagsterInstance) -> list[dg.DagsterRun]:
    return list(instance.get_runs(filters=dg.RunsFilter(job_name=JOB)))


def test_a_second_daemon_is_refused(cluster: Cluster) -> None:
    with serve(cluster.host("daemon-b"), "daemon") as second:
        assert second.process.wait(timeout=60) == 1
    assert "another `flokit serve daemon` holds this deployment" in second.output()
    assert cluster.daemon.process.poll() is None


def test_the_api_serves_on_the_port_given(cluster: Cluster) -> None:
    """(The webserver role is started the same way, by `cli.up.children`, and probed on /server_info.)"""
    port = free_port()
    with serve(cluster.host("api-host"), "api", "--port", str(port), "--workers", "1") as api:
        api.wait_ready()
        assert requests.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
        out = api.output()
        assert "role: api" in out and f"listening: http://127.0.0.1:{port}" in out
        assert "database: postgresql+psycopg://" in out
        # Supervised as `flokit up` supervises: gunicorn killed, restarted, said so in the role's name.
        (gunicorn,) = psutil.Process(api.process.pid).children()
        gunicorn.kill()
        wait_for(lambda: "restarted (pid" in api.output(), 60, f"the restart:\n{api.output()}", api.process)
        (line,) = [line for line in api.output().splitlines() if "restarted (pid" in line]
        assert " flokit serve api: " in line
        wait_for(lambda: _status(f"http://127.0.0.1:{port}/healthz") == 200, 60, "the restarted API")
    assert api.output().rstrip().endswith("stopped.")


def _status(url: str) -> int:
    try:
        return requests.get(url, timeout=5).status_code
    except requests.ConnectionError:
        return 0


def test_flokit_refresh_submits_its_runs_to_the_workers_and_waits_for_them(cluster: Cluster) -> None:
    """An empty workspace's refresh: the engine's run and the catalog's, each through the queue
    (the daemon dequeues it, its launcher sends it to a worker), from a host with no role at all."""
    out = cluster.daemon.output()
    assert "role: daemon" in out and "run launcher: celery" in out and "daemon lock: held" in out
    assert "celery broker: redis://127.0.0.1:" in out
    assert "celery node: w1@" in cluster.workers["w1"].output()
    operator = cluster.host("operator-host")
    done = flokit(operator, "refresh", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [r["name"] for r in result["runs"]] == ["actions_engine", "analyst_catalog"]
    engine = result["runs"][0]["run_id"]
    # What the engine did, though it ran on a worker (its output stays there; its metadata does not).
    assert f"run {engine} succeeded: no workspace" in done.stderr, done.stderr
    assert result["runs"][1]["assets"] == ["analyst_catalog"]
    with instance_of(cluster.daemon) as instance:
        for ran in result["runs"]:
            run = instance.get_run_by_id(ran["run_id"])
            assert run is not None and run.status == dg.DagsterRunStatus.SUCCESS
            assert run.tags[WORKER_TAG].split("@")[0] in cluster.workers
            assert PROCESS_TAG not in run.tags  # not a run of the command's own process
    # The catalog was built on the worker that ran it, not where the command ran.
    catalog = next(r for r in result["runs"] if r["name"] == "analyst_catalog")
    with instance_of(cluster.daemon) as instance:
        run = instance.get_run_by_id(catalog["run_id"])
    assert run is not None
    assert (cluster.host(f"worker-host-{run.tags[WORKER_TAG][1]}").data_dir / "warehouse.duckdb").is_file()
    assert not (operator.data_dir / "warehouse.duckdb").exists()


def test_a_run_whose_worker_host_dies_is_failed_and_retried_on_the_other(cluster: Cluster) -> None:
    """Last in the module: it kills a worker host. The run is submitted as `flokit refresh` submits
    its runs (`through_queue`), whose wait follows the automatic retry: it returns the retry's
    success, not the dead worker's failure."""
    with ExitStack() as stack, instance_of(cluster.daemon) as instance:
        before = {r.run_id for r in runs(instance)}
        lock = psycopg.connect(libpq(cluster.env["FLOKIT_DATABASE_URL"]))
        stack.callback(lock.close)
        lock.execute("LOCK TABLE event_claims IN ACCESS EXCLUSIVE MODE")  # the run waits on it
        execute = stack.enter_context(through_queue(instance, ROOT / "workspace.yaml"))
        submitted = ThreadPoolExecutor(max_workers=1)
        stack.callback(submitted.shutdown)
        waited = submitted.submit(execute, JOB, tags={})

        def new() -> list[dg.DagsterRun]:
            return [r for r in runs(instance) if r.run_id not in before]

        # The worker tags the run before its task starts it, so wait for both: a run killed while
        # STARTING is a different (launch-time) failure from the one this test is about.
        wait_for(
            lambda: any(WORKER_TAG in r.tags and r.status == dg.DagsterRunStatus.STARTED for r in new()),
            120,
            "the run started on a worker",
        )
        (first,) = new()
        assert first.tags["dagster/retry_strategy"] == "ALL_STEPS"  # the launcher's: no step output of a dead host
        victim = first.tags[WORKER_TAG].split("@")[0]
        cluster.workers[victim].kill_host()
        killed = time.monotonic()

        def status(run_id: str) -> dg.DagsterRunStatus | None:
            run = instance.get_run_by_id(run_id)
            return run.status if run else None

        wait_for(lambda: status(first.run_id) == dg.DagsterRunStatus.FAILURE, 60, "the dead worker's run failed")
        detected_s = time.monotonic() - killed
        lock.rollback()  # let the retry through
        wait_for(lambda: len(new()) == 2, 60, "the retry")
        retry_id = next(r.run_id for r in new() if r.run_id != first.run_id)
        wait_for(lambda: status(retry_id) == dg.DagsterRunStatus.SUCCESS, 90, "the retry's success")
        retry = instance.get_run_by_id(retry_id)
        result = waited.result(timeout=60)
        failure = [
            e.message for e in instance.all_logs(first.run_id) if e.dagster_event and e.dagster_event.is_run_failure
        ]
    assert detected_s < 60, detected_s
    assert any(f"worker {victim}@" in message for message in failure), failure
    assert retry is not None and retry.tags["dagster/parent_run_id"] == first.run_id
    assert (result.run_id, result.success) == (retry_id, True)
    survivor = next(name for name in cluster.workers if name != victim)
    assert retry.tags[WORKER_TAG].startswith(f"{survivor}@")


def test_a_worker_with_an_unreachable_broker_exits_1_with_one_line(tmp_path: Path, cluster_env: dict[str, str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    env = {**cluster_env, "FLOKIT_CELERY_BROKER_URL": f"redis://127.0.0.1:{closed}/1", "FLOKIT_DATA_DIR": str(tmp_path)}
    done = subprocess.run(
        [str(BIN / "flokit"), "serve", "worker"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"flokit serve worker: the Celery broker redis://127.0.0.1:{closed}/1 is unreachable: "
        f"Error 111 connecting to 127.0.0.1:{closed}. Connection refused."
    ]
    env["FLOKIT_DATABASE_URL"] = f"postgresql+psycopg://flokit:pw@127.0.0.1:{closed}/flokit"
    done = subprocess.run(
        [str(BIN / "flokit"), "serve", "api"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(
        f"flokit serve api: the database postgresql+psycopg://flokit:***@127.0.0.1:{closed}/flokit is unreachable: "
    )
