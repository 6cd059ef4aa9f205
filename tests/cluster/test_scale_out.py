"""FloKit beyond one machine, on real distributed parts (scripts/with-cluster.sh: PostgreSQL, Redis,
SeaweedFS): hosts that share no directory (tests/support/cluster.py) — two API hosts behind the
shipped nginx front, one daemon and Dagster UI host, two run-worker hosts — with the lake and the
published reports in the object store and every Dagster run on a Celery worker.

The five scenarios of issue 33, in the order they run (the destructive ones last; scenario 2
starts the worker host it killed again):
1. callbacks and a provider notification reach API host 1; an Adjust spend sync is requested on
   API host 2; the refresh runs on the workers; API host 2 serves the payback report with exactly
   that spend and those installs; the lake is in the bucket and no host's data directory holds a
   Parquet file;
5. webhook deliveries drained by both workers at once: each delivered once, signed;
2. `kill -9` of the worker host running a canonical_events run mid-run: failed and retried on
   the other worker, and the lake's rows equal an embedded single-host FloKit's;
4. the object store stopped for 20 s during a refresh: the API keeps serving;
3. `kill -9` of API host 1 under ingest load: every callback answered 200 is in the lake once.
The deployment's own fixtures start in about a minute.

Scenario 1 runs in `make test`, in the phase after the parallel suite where the tests marked
`deployment` run alone (beside the suite's other servers and browsers the deployment's ten
processes overloaded two cores: run 25). The other scenarios are `slow`: `make cluster-test` runs
all five (442 s of pytest here, 7 min 35 s in all with PostgreSQL, Redis, SeaweedFS and nginx
started and stopped; 7c4185e).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import dagster as dg
import polars as pl
import psycopg
import pytest
import requests
from polars.testing import assert_frame_equal

from orchestration.events.sensors import EVENTS_WRITER_TAG
from orchestration.launcher import WORKER_TAG
from tests.providers.adjust_fake import TOKEN, AdjustFake, campaign_name, creative_name, running
from tests.support import BIN, ROOT, free_port, gunicorn_server, wait_for
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
from tests.support.ingest import PATH, callback
from tests.support.nginx import running_nginx
from tests.support.notifications import AUTH, rc_event
from tests.support.notifications import PATH as RC_PATH
from tests.support.objects import bucket_keys, s3_environment
from tests.support.webhook_receiver import running_receiver
from transforms.events import CANONICAL_EVENT_SCHEMA
from transforms.webhooks.verify import verify
from warehouse.lake import Lake
from warehouse.object_lake import ObjectLake
from warehouse.objects import ObjectStore
from warehouse.reports.report_lake import ACQUISITIONS, CANONICAL_EVENTS, PAYBACK, scan_days, scan_table
from warehouse.settings import Settings

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.deployment]


@dataclass
class Deployment:
    root: Path
    lake_url: str
    front: str  # nginx, in front of both API hosts
    apis: list[str]  # each API host directly
    dagster_ui: str  # the webserver on the control host
    hosts: dict[str, Host]
    roles: dict[str, Role]
    workspace: dict[str, str]
    stack: ExitStack  # what the module's teardown stops (a role started again joins it)


def _deployment_env(request: pytest.FixtureRequest, base: Path) -> Iterator[dict[str, str]]:
    redis_base = os.environ.get("FLOKIT_TEST_REDIS_URL")
    if not redis_base or not os.environ.get("FLOKIT_TEST_S3_ENDPOINT"):
        for needed in ("REDIS", "S3"):
            if os.environ.get(f"FLOKIT_TEST_REQUIRE_{needed}") == "1":
                pytest.fail("the cluster tests need scripts/with-cluster.sh (Redis and an S3 server)")
        pytest.skip("the cluster tests need scripts/with-cluster.sh (Redis and an S3 server)")
    # Beyond the rate-limit and serve tests' databases (with-redis.sh: 64).
    broker, results, limits = fresh_redis_databases(32 + 3 * xdist_worker_number(), 3)
    urls = fresh_database_url(request, "postgres", base / "db")
    env = {
        **os.environ,
        **s3_environment(),
        "FLOKIT_DATABASE_URL": next(urls),
        "FLOKIT_LAKE_URL": f"s3://{os.environ['FLOKIT_TEST_S3_BUCKET']}/cluster-{uuid.uuid4().hex[:10]}",
        "FLOKIT_RUN_LAUNCHER": "celery",
        "FLOKIT_CELERY_BROKER_URL": broker,
        "FLOKIT_CELERY_RESULT_URL": results,
        "FLOKIT_RATE_LIMIT_STORAGE": limits,  # limits shared by every API host
        "FLOKIT_SECRET_KEY": "c" * 48,
        "FLOKIT_APP_SESSION_SECRET": "s" * 40,
        "FLOKIT_WEBHOOKS_ALLOW_PRIVATE": "1",  # scenario 5's receiver is on 127.0.0.1
    }
    yield env
    with pytest.raises(StopIteration):
        next(urls)


@pytest.fixture(scope="module")
def deployment(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    base = tmp_path_factory.mktemp("cluster")
    with ExitStack() as stack:
        env = stack.enter_context(_contextual(_deployment_env(request, base)))
        hosts = {name: host(base, name, env) for name in ("api-1", "api-2", "control", "worker-1", "worker-2", "ops")}
        ports = [free_port(), free_port()]
        ui_port = free_port()
        roles = {
            "daemon": stack.enter_context(serve(hosts["control"], "daemon")),
            "webserver": stack.enter_context(serve(hosts["control"], "webserver", "--port", str(ui_port))),
            "worker-1": stack.enter_context(serve(hosts["worker-1"], "worker", "--name", "w1", "-c", "2")),
            "worker-2": stack.enter_context(serve(hosts["worker-2"], "worker", "--name", "w2", "-c", "2")),
            "api-1": stack.enter_context(serve(hosts["api-1"], "api", "--port", str(ports[0]), "--workers", "2")),
            "api-2": stack.enter_context(serve(hosts["api-2"], "api", "--port", str(ports[1]), "--workers", "2")),
        }
        for role in roles.values():
            role.wait_ready()
        front, _ = stack.enter_context(running_nginx(base / "nginx", *ports))
        made = flokit(hosts["ops"], "admin", "bootstrap", "--name", "Cluster", "--json")
        assert made.returncode == 0, made.stderr
        yield Deployment(
            base,
            env["FLOKIT_LAKE_URL"],
            front,
            [f"http://127.0.0.1:{port}" for port in ports],
            f"http://127.0.0.1:{ui_port}",
            hosts,
            roles,
            json.loads(made.stdout),
            stack,
        )


@dataclass
class _contextual:
    """A generator fixture body used as a context manager (its teardown runs at exit)."""

    generator: Iterator[dict[str, str]]

    def __enter__(self) -> dict[str, str]:
        return next(self.generator)

    def __exit__(self, *_exc: object) -> None:
        for _ in self.generator:
            pass


def _connect(deployment: Deployment, kind: str, config: dict[str, object]) -> str:
    path = deployment.hosts["ops"].root / f"{kind}.json"
    path.write_text(json.dumps(config))
    done = flokit(
        deployment.hosts["ops"], "admin", "integrations", "connect", "--workspace",
        deployment.workspace["workspace_id"], "--type", kind, "--config", str(path), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["integration_id"])


def test_ingest_on_one_api_host_a_sync_on_the_other_and_the_refresh_on_the_workers(deployment: Deployment) -> None:
    workspace = deployment.workspace
    api_1, api_2 = deployment.apis
    today = datetime.now(UTC).date()
    days = [today - timedelta(days=2), today - timedelta(days=1)]
    installs = {campaign_name(0): 3, campaign_name(1): 1}
    for day in days:
        for i, (campaign, per_day) in enumerate(installs.items()):
            for n in range(per_day):
                at = datetime(day.year, day.month, day.day, 9 + n, tzinfo=UTC)
                params = callback(
                    workspace, created_at=str(int(at.timestamp())), adid=f"{day}-{i}-{n}",
                    user_id=f"user-{day}-{i}-{n}", country="us", campaign_name=campaign,
                    creative_name=creative_name(i, 0),
                )  # fmt: skip
                assert requests.get(api_1 + PATH, params=params, timeout=10).json()["written"] == 1

    # A purchase notified by the subscription provider to API host 1, read by the app on API host 2.
    rc = _connect(
        deployment, "subscription_provider_a",
        {"api_key": "sk_rc_0123456789abcdef", "project_id": "proj1a2b3c4d", "webhook_authorization": AUTH,
         "app_id": workspace["app_id"]},
    )  # fmt: skip
    buyer = f"user-{days[0]}-0-0"
    body = {"api_version": "1.0", "event": rc_event("INITIAL_PURCHASE", user=buyer)}
    notified = requests.post(
        f"{api_1}{RC_PATH}?integration={rc}", json=body, headers={"Authorization": AUTH}, timeout=10
    )
    assert notified.status_code == 200, notified.text
    read = requests.get(
        f"{api_2}/api/paywall/entitlement", headers={"x-user-id": buyer, "x-app-key": workspace["app_key"]}, timeout=10
    )
    assert read.status_code == 200 and read.json() == {"active": True, "source": "iap"}

    rw = {"Authorization": f"Bearer {workspace['api_key_read_write']}"}
    ro = {"Authorization": f"Bearer {workspace['api_key_read_only']}"}
    with running(AdjustFake(campaigns=2, creatives=1, countries=1)) as fake:
        adjust = _connect(
            deployment, "attribution_provider_a", {"api_token": TOKEN, "base_url": fake.url, "lookback_days": 3}
        )
        queued = requests.post(f"{api_2}/v1/integrations/{adjust}/sync", headers=rw, timeout=10)
        assert queued.status_code == 202, queued.text
        # The daemon's sensor hands the sync to a worker; the operator then refreshes (every run on a worker).
        wait_for(
            lambda: (
                requests.get(f"{api_2}/v1/integrations/{adjust}", headers=ro, timeout=10).json()["integration"][
                    "last_synced_at"
                ]
                is not None
            ),
            180,
            "the Adjust sync, run on a worker",
        )
        expected = {day: fake.expected_spend(day) for day in days}
    refreshed = flokit(deployment.hosts["ops"], "refresh", "--json", timeout=600)
    assert refreshed.returncode == 0, refreshed.stdout + refreshed.stderr
    runs = json.loads(refreshed.stdout)["runs"]
    with instance_of(deployment.roles["daemon"]) as instance:
        for ran in runs:
            run = instance.get_run_by_id(ran["run_id"])
            assert run is not None and run.tags[WORKER_TAG].split("@")[0] in ("w1", "w2"), ran

    query = {"start_date": days[0].isoformat(), "end_date": days[-1].isoformat(), "group_by": "campaign"}

    def served() -> dict[str, dict[str, object]]:
        report = requests.get(f"{api_2}/v1/reports/payback", params=query, headers=ro, timeout=10)
        assert report.status_code == 200, report.text
        return {row["cohort"]: row for row in report.json()["data"]}

    published = time.monotonic()
    wait_for(lambda: set(served()) == set(installs), 15, "API host 2 serving the new reports")
    assert time.monotonic() - published < 10  # the follower polls every 2 s
    rows = served()
    for campaign, per_day in installs.items():
        synced = sum(cost for day in days for (c, _, _), cost in expected[day].items() if c == campaign)
        assert rows[campaign]["spend"] == pytest.approx(synced, abs=0.01)
        assert rows[campaign]["cac"] == pytest.approx(synced / (per_day * len(days)), abs=0.01)
    through_front = requests.get(f"{deployment.front}/v1/reports/payback", params=query, headers=ro, timeout=10)
    assert {row["cohort"] for row in through_front.json()["data"]} == set(installs)

    keys = bucket_keys(deployment.lake_url)
    for dataset in ("canonical_events", "spend_raw", "payback", "acquisitions"):
        assert f"{dataset}/_manifest.json" in keys, dataset
    assert "reports/current.json" in keys and "catalog/catalog.json" in keys
    for ran in runs:  # each run's stdout and stderr, for the Dagster UI of the control host
        assert any(key.startswith(f"compute_logs/storage/{ran['run_id']}/") for key in keys), ran
    for name, each in deployment.hosts.items():
        assert not list(each.data_dir.rglob("*.parquet")), name


DRAIN_JOB = "webhook_deliveries_job"
WEBHOOK_EVENTS = 400  # each to two endpoints: 800 deliveries, about 25 s of one drain's 32 senders
RECEIVER_DELAY_S = 1.0  # a slow receiver keeps every drain busy long enough to overlap the others


def _queue_test_events(deployment: Deployment, count: int) -> list[dict[str, object]]:
    """`POST /v1/webhooks/test` through nginx `count` times (waiting out a 429's Retry-After)."""
    rw = {"Authorization": f"Bearer {deployment.workspace['api_key_read_write']}"}
    queued: list[dict[str, object]] = []
    while len(queued) < count:
        answer = requests.post(
            f"{deployment.front}/v1/webhooks/test", json={"event_type": "action.created"}, headers=rw, timeout=10
        )
        if answer.status_code == 429:
            time.sleep(float(answer.headers.get("Retry-After", "1")))
            continue
        assert answer.status_code == 202, answer.text
        queued.append(answer.json())
    return queued


# What the Dagster UI's "Launch run" sends (the webserver's GraphQL API); the run goes to the queue.
LAUNCH_RUN = """
mutation Launch($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
  }
}
"""


def _launch_from_the_ui(deployment: Deployment, job: str) -> str:
    selector = {"repositoryLocationName": "flokit", "repositoryName": "__repository__", "jobName": job}
    answer = requests.post(
        f"{deployment.dagster_ui}/graphql",
        json={"query": LAUNCH_RUN, "variables": {"params": {"selector": selector, "runConfigData": {}}}},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    launched = answer.json()["data"]["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    return str(launched["run"]["runId"])


def _drain_window(instance: dg.DagsterInstance, run_id: str) -> tuple[float, float, int]:
    """When a drain run's op started and returned, and how many sends it made (its output's
    `sends`, orchestration/webhooks/jobs.py)."""
    logs = instance.all_logs(run_id)
    (started,) = [e.timestamp for e in logs if e.dagster_event_type == dg.DagsterEventType.STEP_START]
    (output,) = [e for e in logs if e.dagster_event_type == dg.DagsterEventType.STEP_OUTPUT]
    assert output.dagster_event is not None
    sends = output.dagster_event.step_output_data.metadata["sends"].value
    assert isinstance(sends, int)
    return started, output.timestamp, sends


@pytest.mark.slow
@pytest.mark.skip(
    reason="to restate for the long-lived drains (issue 36 part 2): the sensor's two slot runs, woken by "
    "NOTIFY, now send every delivery before the three runs launched from the UI start, so those find "
    "nothing and 'both workers drained at once' no longer describes who sends (make cluster-test, "
    "29 Nov 2026: every delivery arrived, the UI runs sent 0)"
)
def test_webhook_deliveries_drained_by_both_workers_at_once_arrive_once_each(deployment: Deployment) -> None:
    """Scenario 5: 400 sample events (`POST /v1/webhooks/test`, through nginx) for two endpoints
    of a receiver on 127.0.0.1 that answers in 1 s, drained by three runs an operator launches
    from the Dagster UI (its GraphQL API) once they are queued: the daemon's sensor asks for
    one drain at a time (none while one is queued or holds leases), so it stands aside or adds a
    fourth. Three runs at once on two workers of two slots each: both workers drain (asserted:
    runs on w1 and on w2 sent, and their drain ops ran at the same time), claiming from one
    PostgreSQL queue. Every delivery arrives, signed (checked with the shipped verifier), with the
    event id it was queued with, and none twice: the documented bound on re-sends
    (docs/reliability.md: at most 2 x 32 per drain killed mid-send) is nothing when no drain dies.
    43 s here (the drains: 8 to 12 s each, two workers side by side for 8 s)."""
    ops = deployment.hosts["ops"]
    with running_receiver() as receiver, instance_of(deployment.roles["daemon"]) as instance:
        receiver.respond = lambda _got: (time.sleep(RECEIVER_DELAY_S), (200, b"ok"))[1]
        secrets = {}
        for path in ("/a", "/b"):
            added = flokit(
                ops, "admin", "webhooks", "add", "--workspace", deployment.workspace["workspace_id"],
                "--url", receiver.url + path, "--events", "action.created", "--json",
            )  # fmt: skip
            assert added.returncode == 0, added.stderr
            endpoint = json.loads(added.stdout)
            secrets[endpoint["endpoint_id"]] = (path, endpoint["signing_secret"])
        before = {r.run_id for r in instance.get_runs(filters=dg.RunsFilter(job_name=DRAIN_JOB))}
        queued = _queue_test_events(deployment, WEBHOOK_EVENTS)
        for _ in range(3):  # more than one worker's two slots
            _launch_from_the_ui(deployment, DRAIN_JOB)
        expected = {
            (secrets[d["endpoint_id"]][0], d["delivery_id"]): str(event["event_id"])
            for event in queued
            for d in event["deliveries"]  # type: ignore[attr-defined]
        }
        assert len(expected) == 2 * WEBHOOK_EVENTS

        def received() -> set[tuple[str, str]]:
            return {(r.path, r.header("Service-Delivery-Id")) for r in list(receiver.requests)}

        wait_for(lambda: received() == set(expected), 180, "every delivery at the receiver")

        def drains() -> list[dg.DagsterRun]:
            return [r for r in instance.get_runs(filters=dg.RunsFilter(job_name=DRAIN_JOB)) if r.run_id not in before]

        wait_for(lambda: all(r.is_finished for r in drains()), 90, "the drain runs ended")
        runs = drains()
        assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs), [(r.run_id, r.status) for r in runs]
        spans: dict[str, list[tuple[float, float]]] = {"w1": [], "w2": []}
        for run in runs:
            started, ended, sends = _drain_window(instance, run.run_id)
            worker = run.tags[WORKER_TAG].split("@")[0]
            print(f"\n[cluster] drain {run.run_id[:8]} on {worker}: {sends} sends in {ended - started:.1f} s")
            if sends:
                spans[worker].append((started, ended))
        requests_seen = list(receiver.requests)
    for endpoint_id in secrets:  # the receiver is gone: what later scenarios emit is not for it
        disabled = flokit(ops, "admin", "webhooks", "disable", "--endpoint", endpoint_id)
        assert disabled.returncode == 0, disabled.stderr

    assert spans["w1"] and spans["w2"], spans  # both workers drained
    overlap = max(min(b, d) - max(a, c) for a, b in spans["w1"] for c, d in spans["w2"])
    print(f"[cluster] w1 and w2 drained at the same time for {overlap:.1f} s")
    assert overlap > 0, spans
    ids = Counter(r.header("Service-Delivery-Id") for r in requests_seen)
    assert [delivery for delivery, n in ids.items() if n > 1] == []  # no delivery sent twice
    path_secret = dict(secrets.values())
    for got in requests_seen:
        verdict = verify(got.body, got.all("Service-Signature"), [path_secret[got.path]], got.now_ms)
        assert verdict, verdict.reason
        delivery = got.header("Service-Delivery-Id")
        assert json.loads(got.body)["id"] == expected[(got.path, delivery)] == got.header("Service-Event-Id")


# Scenario 2's days: no other scenario sends events for them, so their rows are this scenario's alone.
KILL_DAYS_AGO = (12, 11, 10)


def _kill_callbacks(workspace: dict[str, str], days: list[date]) -> list[dict[str, str]]:
    """Four installs a day, two campaigns and two countries: what both deployments are fed."""
    sent = []
    for day in days:
        for n in range(4):
            at = datetime(day.year, day.month, day.day, 10 + n, tzinfo=UTC)
            params = callback(
                workspace, created_at=str(int(at.timestamp())), adid=f"kill-{day}-{n}", user_id=f"kill-{day}-{n}",
                country=("us", "de")[n // 2], campaign_name=campaign_name(n % 2), creative_name=creative_name(n % 2, 0),
            )  # fmt: skip
            sent.append(params)
    return sent


def _refreshed_rows(lake: Lake, days: list[date]) -> dict[str, pl.DataFrame]:
    """What a refresh wrote for `days`: their canonical events and acquisitions, and the payback
    rows of their cohorts; without what two deployments mint differently by design (workspace,
    app and so event ids, arrival times). Sorted: a row set."""
    frames = {
        "canonical_events": scan_days(lake, CANONICAL_EVENTS, days).drop("event_id", "workspace_id", "received_at"),
        "acquisitions": scan_days(lake, ACQUISITIONS, days).drop("workspace_id"),
        "payback": scan_table(lake, PAYBACK).filter(pl.col("cohort_date").is_in(days)).drop("workspace_id"),
    }
    return {name: frame.collect().pipe(lambda f: f.sort(f.columns)) for name, frame in frames.items()}


def _single_host_rows(single: Host, days: list[date]) -> dict[str, pl.DataFrame]:
    """The same callbacks through one embedded FloKit, as `make up` runs it: SQLite, the lake on
    local disk, every run in `flokit refresh`'s own process; what its refresh wrote."""
    made = flokit(single, "admin", "bootstrap", "--name", "Cluster", "--json")
    assert made.returncode == 0, made.stderr
    workspace = json.loads(made.stdout)
    with gunicorn_server({**single.env, "FLOKIT_SURFACES": "ingest"}, workers=1, log_dir=single.root) as server:
        for params in _kill_callbacks(workspace, days):
            assert requests.get(server.base + PATH, params=params, timeout=10).json()["written"] == 1
    refreshed = flokit(single, "refresh", "--json")
    assert refreshed.returncode == 0, refreshed.stdout + refreshed.stderr
    return _refreshed_rows(Settings.from_env(single.env).paths.lake(), days)


@pytest.mark.slow
def test_a_worker_host_killed_mid_refresh_loses_and_duplicates_no_row(
    deployment: Deployment, request: pytest.FixtureRequest
) -> None:
    """Scenario 2: `kill -9` of the worker host running the canonical_events refresh of three
    days, after it wrote the first day's partition to the lake and before it recorded that in
    PostgreSQL (a lock held on `landed_events` stops it there; reads go on): run monitoring and
    the launcher's worker check fail the run within a minute, naming the worker; `run_retries`
    runs it again on the other worker, which succeeds; after the operator's next `flokit refresh`
    the lake's rows for those days (canonical events, acquisitions, the payback rows of their
    cohorts) equal, row for row, what one embedded FloKit writes from the same callbacks: the
    half-done run left nothing missing, doubled or stale. The run killed is the one the daemon's
    `canonical_events_sensor` requested for the new callbacks (the deployment refreshing itself;
    a `flokit refresh` meanwhile would queue behind it on the writer tag). The embedded reference
    runs beside the cluster's recovery; the killed worker is started again. 75 s here (77 s alone
    with scenario 5; 176 s once while the machine ran other work)."""
    ops = deployment.hosts["ops"]
    today = datetime.now(UTC).date()
    days = [today - timedelta(days=n) for n in KILL_DAYS_AGO]
    sent = _kill_callbacks(deployment.workspace, days)
    lake = _lake(deployment)
    urls = fresh_database_url(request, "sqlite", deployment.root / "single")  # <root>/single/data/flokit.db
    plain = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}  # no cluster setting at all
    single = host(deployment.root, "single", {**plain, "FLOKIT_DATABASE_URL": next(urls)})

    def day_rows(day: date) -> int:
        partition = lake.days(CANONICAL_EVENTS).get(day)
        frame = lake.scan([partition] if partition else [], CANONICAL_EVENT_SCHEMA)
        return frame.filter(pl.col("adid").str.starts_with("kill-")).collect().height

    with (
        ThreadPoolExecutor(max_workers=1) as beside,
        ExitStack() as stack,
        instance_of(deployment.roles["daemon"]) as instance,
    ):

        def writers() -> list[dg.DagsterRun]:
            return list(instance.get_runs(filters=dg.RunsFilter(tags={EVENTS_WRITER_TAG: "1"})))

        before = {r.run_id for r in writers()}
        for params in sent:  # a burst of a fraction of a second: one sensor tick sees all three days
            assert requests.get(deployment.apis[0] + PATH, params=params, timeout=10).json()["written"] == 1
        lock = psycopg.connect(libpq(ops.env["FLOKIT_DATABASE_URL"]))
        stack.callback(lock.close)
        lock.execute("LOCK TABLE landed_events IN EXCLUSIVE MODE")  # reads pass, marking rows written waits

        def started() -> list[dg.DagsterRun]:
            return [
                r
                for r in writers()
                if r.run_id not in before and r.status == dg.DagsterRunStatus.STARTED and WORKER_TAG in r.tags
            ]

        wait_for(lambda: bool(started()) and day_rows(days[0]) == 4, 120, "the first day written by a run on a worker")
        (first,) = started()
        assert day_rows(days[-1]) == 0  # mid-run: the last day is not written yet
        victim = first.tags[WORKER_TAG].split("@")[0]
        role = f"worker-{victim.removeprefix('w')}"
        deployment.roles[role].kill_host()
        killed = time.monotonic()
        reference = beside.submit(_single_host_rows, single, days)
        try:

            def status(run_id: str) -> dg.DagsterRunStatus | None:
                run = instance.get_run_by_id(run_id)
                return run.status if run else None

            wait_for(lambda: status(first.run_id) == dg.DagsterRunStatus.FAILURE, 90, "the dead worker's run failed")
            detected_s = time.monotonic() - killed
            lock.rollback()  # the retry may now record what it writes

            def retries() -> list[dg.DagsterRun]:
                return [r for r in writers() if r.tags.get("dagster/parent_run_id") == first.run_id]

            wait_for(lambda: len(retries()) == 1, 60, "the retry")
            retry_id = retries()[0].run_id
            wait_for(lambda: status(retry_id) == dg.DagsterRunStatus.SUCCESS, 120, "the retry's success")
            retry = instance.get_run_by_id(retry_id)
            failure = [
                e.message for e in instance.all_logs(first.run_id) if e.dagster_event and e.dagster_event.is_run_failure
            ]
            assert detected_s < 60, detected_s
            assert any(f"worker {victim}@" in message for message in failure), failure
            survivor = "w2" if victim == "w1" else "w1"
            assert retry is not None and retry.tags[WORKER_TAG].startswith(f"{survivor}@"), retry
            pending = "SELECT count(*) FROM landed_events WHERE adid LIKE 'kill-%%' AND NOT in_lake"
            wait_for(lambda: lock.execute(pending).fetchone() == (0,), 60, "every landed row recorded in the lake")
            lock.rollback()
        finally:  # the worker host comes back (ready by the end) for the scenarios after this one
            again = serve(deployment.hosts[role], "worker", "--name", victim, "-c", "2", label=f"{role}-restarted")
            deployment.roles[role] = deployment.stack.enter_context(again)

        refreshed = flokit(ops, "refresh", "--json", timeout=600)  # the reports of the three days
        assert refreshed.returncode == 0, refreshed.stdout + refreshed.stderr
        cluster = _refreshed_rows(_lake(deployment), days)
        single_host = reference.result()
    for _ in urls:  # the reference's database is dropped
        pass
    deployment.roles[role].wait_ready()
    assert cluster["canonical_events"].height == len(sent) and cluster["acquisitions"].height == len(sent)
    assert cluster["canonical_events"]["adid"].n_unique() == len(sent)
    assert cluster["payback"].height > 0
    for name, frame in single_host.items():
        assert_frame_equal(cluster[name], frame, check_exact=False)


def _payback(api: str, deployment: Deployment, day: date) -> requests.Response:
    query = {"start_date": day.isoformat(), "end_date": day.isoformat(), "group_by": "campaign"}
    ro = {"Authorization": f"Bearer {deployment.workspace['api_key_read_only']}"}
    return requests.get(f"{api}/v1/reports/payback", params=query, headers=ro, timeout=10)


def _send_installs(base: str, workspace: dict[str, str], day: date, prefix: str, count: int) -> dict[str, int]:
    """Install callbacks of `count` new users on `day`: the status each got, by adid."""
    statuses = {}
    for n in range(count):
        at = datetime(day.year, day.month, day.day, 12, tzinfo=UTC) + timedelta(seconds=n)
        params = callback(
            workspace, created_at=str(int(at.timestamp())), adid=f"{prefix}-{n}", user_id=f"{prefix}-{n}",
            country="us", campaign_name=campaign_name(0), creative_name=creative_name(0, 0),
        )  # fmt: skip
        try:
            statuses[params["adid"]] = requests.get(base + PATH, params=params, timeout=10).status_code
        except requests.ConnectionError:
            statuses[params["adid"]] = 0
    return statuses


def _lake(deployment: Deployment) -> ObjectLake:
    return ObjectLake(ObjectStore(deployment.lake_url, env=s3_environment()))


def _store_pids() -> list[int]:
    found = subprocess.run(
        ["pgrep", "-f", "--", f"-dir={os.environ['FLOKIT_TEST_S3_DIR']}"], capture_output=True, text=True
    )
    return [int(p) for p in found.stdout.split()]


def _stop_store() -> None:
    """SIGTERM to the SeaweedFS of scripts/with-s3.sh (its data directory stays)."""
    pids = _store_pids()
    assert pids, "the object store is not running"
    for pid in pids:
        os.kill(pid, signal.SIGTERM)
    wait_for(lambda: not _store_pids(), 30, "the object store stopped")


def _start_store(log: Path) -> None:
    """The same server on the same data again (FLOKIT_TEST_S3_CMD); with-s3.sh stops it at the end."""
    # Detached (as with-s3.sh started it): no child of this process to reap.
    command = f"setsid {os.environ['FLOKIT_TEST_S3_CMD']} >>{shlex.quote(str(log))} 2>&1 &"
    subprocess.run(["bash", "-c", command], check=True, timeout=30)
    endpoint = os.environ["FLOKIT_TEST_S3_ENDPOINT"]
    wait_for(lambda: _status(f"{endpoint}/{os.environ['FLOKIT_TEST_S3_BUCKET']}") == 403, 60, "the object store")


def _status(url: str) -> int:
    try:
        return requests.get(url, timeout=2).status_code
    except requests.ConnectionError:
        return 0


@pytest.mark.slow
def test_an_object_store_outage_during_a_refresh_keeps_the_reports_served(deployment: Deployment) -> None:
    """Scenario 4: the store stopped for 20 s while a refresh runs: the refresh fails cleanly (or
    retries through it), the API keeps serving the last published reports, and once the store is
    back the next refresh publishes."""
    api_2 = deployment.apis[1]
    day = datetime.now(UTC).date() - timedelta(days=3)
    assert set(_send_installs(api_2, deployment.workspace, day, "outage-a", 5).values()) == {200}
    first = flokit(deployment.hosts["ops"], "refresh", "--json", timeout=600)
    assert first.returncode == 0, first.stderr
    wait_for(lambda: _payback(api_2, deployment, day).json()["data"] != [], 15, "the first reports")
    before = _payback(api_2, deployment, day).json()

    assert set(_send_installs(api_2, deployment.workspace, day, "outage-b", 5).values()) == {200}
    ops = deployment.hosts["ops"]
    refresh = subprocess.Popen(
        [str(BIN / "flokit"), "refresh", "--json"], cwd=ROOT, env=ops.env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(3)  # the runs are queued and launched
    _stop_store()
    stopped = time.monotonic()
    while time.monotonic() - stopped < 20:
        during = _payback(api_2, deployment, day)
        assert during.status_code == 200 and during.json() == before  # the copy this host holds
        time.sleep(2)
    _start_store(deployment.root / "seaweedfs-restarted.log")
    out, err = refresh.communicate(timeout=600)
    assert refresh.returncode in (0, 1), err
    if refresh.returncode == 1:
        assert any(not run["success"] for run in json.loads(out)["runs"]), out

    again = flokit(ops, "refresh", "--json", timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    wait_for(
        lambda: _payback(api_2, deployment, day).json()["meta"]["generated_at"] != before["meta"]["generated_at"],
        15,
        "new reports",
    )
    installs = _lake(deployment).scan(_lake(deployment).days("canonical_events").values(), CANONICAL_EVENT_SCHEMA)
    landed = installs.filter(pl.col("adid").str.starts_with("outage-")).collect()
    assert landed.height == 10 and landed["adid"].n_unique() == 10  # each once, none lost


@pytest.mark.slow
def test_an_api_host_killed_under_ingest_load_loses_no_answered_callback(deployment: Deployment) -> None:
    """Scenario 3: callbacks through nginx while API host 1 is killed (`kill -9` of the host):
    host 2 keeps answering, and every callback answered 200 is in the lake exactly once."""
    day = datetime.now(UTC).date() - timedelta(days=4)
    results: dict[str, int] = {}
    done = threading.Event()

    def load(worker: int) -> None:
        batch = 0
        while not done.is_set():
            results.update(_send_installs(deployment.front, deployment.workspace, day, f"load-{worker}-{batch}", 20))
            batch += 1

    threads = [threading.Thread(target=load, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(4)
    deployment.roles["api-1"].kill_host()
    killed_at = len(results)
    time.sleep(6)
    done.set()
    for thread in threads:
        thread.join(timeout=60)
    after_kill = list(results.values())[killed_at + 40 :]  # once the requests in flight settled
    assert after_kill and set(after_kill) == {200}, sorted(set(after_kill))
    assert _status(f"{deployment.apis[1]}/healthz") == 200

    refreshed = flokit(deployment.hosts["ops"], "refresh", "--json", timeout=600)
    assert refreshed.returncode == 0, refreshed.stderr
    lake = _lake(deployment)
    landed = (
        lake.scan(lake.days("canonical_events").values(), CANONICAL_EVENT_SCHEMA)
        .filter(pl.col("adid").str.starts_with("load-"))
        .group_by("adid")
        .len()
        .collect()
    )
    counts = dict(landed.iter_rows())
    answered = [adid for adid, status in results.items() if status == 200]
    assert len(answered) > 100
    assert [adid for adid in answered if counts.get(adid) != 1] == []
    assert max(counts.values()) == 1  # no callback twice, answered or not
