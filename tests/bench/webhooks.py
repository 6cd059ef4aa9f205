"""Benchmark: webhook deliveries through the sensor-and-job path to a local receiver.

    python -m tests.bench.webhooks [--deliveries 2000] [--no-daemon]

Three measurements in one run, same machine, same receiver (http.server on 127.0.0.1):
1. baseline: direct signed sends from a 32-thread pool, no database, no Dagster;
2. in-process: N queued deliveries drained by sensor evaluations (build_sensor_context) and
   `execute_in_process` runs of the real job: the path's own throughput without launch costs;
3. daemon: the real `dagster-daemon` with the dev instance settings (queued runs, dequeue
   interval 1 s, at most 2 concurrent runs) and FLOKIT_SENSOR_INTERVAL_S=1: a steady stream
   (enqueue-to-receipt latency p50/p99), a burst of N (deliveries/s from enqueue to last
   receipt), then a backlog of N released at once (an endpoint enabled: the drains' own rate).
   Bounded in time; the daemon is stopped at the end.
The operational database is SQLite unless FLOKIT_TEST_POSTGRES_URL is set (`make bench`).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from multiprocessing.connection import Connection
from pathlib import Path

import dagster as dg

from orchestration.resources import DatabaseResource, InstanceKeyResource
from orchestration.webhooks.jobs import webhook_deliveries_job
from orchestration.webhooks.resources import WebhookHttpClient, WebhookQueue
from orchestration.webhooks.sensors import build_webhook_sensor
from tests.support import ROOT, WEBHOOK_KEY
from tests.support.webhook_receiver import Received, running_receiver
from transforms.webhooks.signing import request_headers
from warehouse import migrate
from warehouse.bootstrap import bootstrap
from warehouse.db import Database
from warehouse.settings import Settings
from warehouse.webhooks import endpoints
from warehouse.webhooks.outbox import emit_event

DEV_INSTANCE = ROOT / "orchestration" / "instance" / "dagster.dev.yaml"


class RemoteReceiver:
    """The receiver in its own process (as a real receiver would be), so that it does not share
    this process's GIL with the sender threads; receipts stream back over a pipe."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(child,), daemon=True)
        self.process.start()
        self.url = parent.recv()
        self._pipe = parent
        self._got: dict[str, list[Received]] = {}
        self._lock = threading.Lock()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        while True:
            try:
                received = self._pipe.recv()
            except EOFError:
                return
            with self._lock:
                self._got.setdefault(received.path, []).append(received)

    def at(self, path: str) -> list[Received]:
        with self._lock:
            return list(self._got.get(path, []))

    def close(self) -> None:
        self.process.terminate()
        self.process.join(timeout=10)


def _serve(pipe: Connection) -> None:
    lock = threading.Lock()

    def forward(received: Received) -> None:
        with lock:
            pipe.send(received)

    with running_receiver() as receiver:
        receiver.on_receive = forward
        pipe.send(receiver.url)
        threading.Event().wait()


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def latencies(receiver: RemoteReceiver, path: str) -> list[float]:
    out = []
    for r in receiver.at(path):
        created = datetime.fromisoformat(json.loads(r.body)["created_at"].replace("Z", "+00:00"))
        out.append(r.received_at - created.timestamp())
    return out


def wait_until(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def endpoint(db: Database, ws: str, url: str) -> str:
    with db.write() as conn:
        e, _ = endpoints.create_endpoint(
            conn, workspace_id=ws, url=url, events=["action.created"], allow_private=True, instance_key=WEBHOOK_KEY
        )
    return e.id


def emit_many(db: Database, ws: str, n: int, chunk: int = 200) -> None:
    for i in range(0, n, chunk):
        with db.write() as conn:
            for j in range(i, min(n, i + chunk)):
                emit_event(conn, workspace_id=ws, event_type="action.created", data={"n": j})


def disable(db: Database, endpoint_id: str) -> None:
    with db.write() as conn:
        endpoints.set_enabled(conn, endpoint_id=endpoint_id, enabled=False)


def baseline(receiver: RemoteReceiver, n: int) -> float:
    http = WebhookHttpClient(allow_private=True)
    body = json.dumps({"id": "evt_bench", "type": "action.created", "data": {}}).encode()
    url = receiver.url + "/baseline"

    def one(i: int) -> None:
        headers = request_headers(
            body=body, secrets=["whsec_" + "A" * 44], now_ms=int(time.time() * 1000),
            event_id="evt_bench", delivery_id=f"dlv_{i}", attempt=1,
        )  # fmt: skip
        http.post(url=url, body=body, headers=headers)

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=32) as pool:
        list(pool.map(one, range(n)))
    return n / (time.perf_counter() - start)


def in_process(settings: Settings, db: Database, ws: str, receiver: RemoteReceiver, n: int) -> tuple[float, int]:
    endpoint_id = endpoint(db, ws, receiver.url + "/inproc")
    emit_many(db, ws, n)
    sensor = build_webhook_sensor(1)
    database = DatabaseResource(url=settings.database_url)
    http = WebhookHttpClient(allow_private=True)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    (settings.data_dir / "instance.key").write_text(WEBHOOK_KEY + "\n")  # what `endpoint` sealed with
    key = InstanceKeyResource(data_dir=str(settings.data_dir))
    resources = {"database": database, "webhook_queue": WebhookQueue(), "webhook_http": http, "instance_key": key}
    runs, cursor = 0, None
    start = time.perf_counter()
    with dg.instance_for_test() as instance:
        while len(receiver.at("/inproc")) < n:
            context = dg.build_sensor_context(
                cursor=cursor, instance=instance, resources={"database": database, "webhook_queue": WebhookQueue()}
            )
            result = sensor(context)
            if isinstance(result, dg.SkipReason):
                raise RuntimeError(f"sensor skipped with deliveries outstanding: {result.skip_message}")
            cursor = result.cursor
            for request in result.run_requests:
                webhook_deliveries_job.execute_in_process(instance=instance, tags=request.tags, resources=resources)
                runs += 1
    rate = n / (time.perf_counter() - start)
    disable(db, endpoint_id)
    return rate, runs


def start_daemon(settings: Settings, home: Path, log: Path) -> subprocess.Popen[bytes]:
    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(DEV_INSTANCE, home / "dagster.yaml")
    env = {**os.environ, **settings.child_env(), "DAGSTER_HOME": str(home), "FLOKIT_SECRET_KEY": WEBHOOK_KEY}
    daemon = str(Path(sys.executable).parent / "dagster-daemon")
    with log.open("wb") as out:
        return subprocess.Popen(
            [daemon, "run", "-w", str(ROOT / "workspace.yaml")],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def with_daemon(
    settings: Settings, db: Database, ws: str, receiver: RemoteReceiver, n: int, stream_rate: float, stream_s: float
) -> dict[str, float]:
    figures: dict[str, float] = {}
    daemon = start_daemon(settings, settings.data_dir / "dagster", settings.data_dir / "daemon.log")
    try:
        # Warm-up: the first delivery proves the daemon, code location and sensor are live.
        warm = endpoint(db, ws, receiver.url + "/warm")
        emit_many(db, ws, 1)
        if not wait_until(lambda: receiver.at("/warm"), 180):
            raise RuntimeError(f"daemon delivered nothing in 180 s; see {settings.data_dir / 'daemon.log'}")
        disable(db, warm)

        stream = endpoint(db, ws, receiver.url + "/stream")
        total = int(stream_rate * stream_s)
        t0 = time.monotonic()
        for i in range(total):  # steady arrivals: one event every 1/rate seconds
            emit_many(db, ws, 1)
            time.sleep(max(0.0, t0 + (i + 1) / stream_rate - time.monotonic()))
        wait_until(lambda: len(receiver.at("/stream")) >= total, 120)
        lat = latencies(receiver, "/stream")
        figures |= {"stream_sent": total, "stream_received": len(lat)}
        figures |= {"p50_s": statistics.median(lat), "p99_s": pct(lat, 99), "max_s": max(lat)}
        disable(db, stream)

        endpoint(db, ws, receiver.url + "/burst")
        start = time.monotonic()
        emit_many(db, ws, n)
        enqueued = time.monotonic() - start
        wait_until(lambda: len(receiver.at("/burst")) >= n, 180)
        got = receiver.at("/burst")
        last = max(r.received_at for r in got)
        first = min(r.received_at for r in got)
        wall_start = time.time() - (time.monotonic() - start)
        figures |= {
            "burst": n,
            "burst_received": len(got),
            "burst_enqueue_s": enqueued,
            "burst_rate_from_enqueue": len(got) / (last - wall_start),
            "burst_rate_first_to_last_receipt": len(got) / max(last - first, 1e-9),
            "burst_p50_s": statistics.median(latencies(receiver, "/burst")),
        }

        # A backlog due all at once: N deliveries queued for a disabled endpoint, then enabled
        # in one transaction (which wakes the drains). With drains that start sending while the
        # burst above is still being enqueued, its first-to-last rate is the enqueueing rate;
        # this one is the drains' own.
        held = endpoint(db, ws, receiver.url + "/backlog")
        disable(db, held)
        emit_many(db, ws, n)
        released = time.time()
        with db.write() as conn:
            endpoints.set_enabled(conn, endpoint_id=held, enabled=True)
        wait_until(lambda: len(receiver.at("/backlog")) >= n, 180)
        got = receiver.at("/backlog")
        last = max(r.received_at for r in got)
        figures |= {
            "backlog_received": len(got),
            "backlog_rate_from_release": len(got) / (last - released),
            "backlog_first_receipt_s": min(r.received_at for r in got) - released,
        }
    finally:
        stop(daemon)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--deliveries", type=int, default=2000)
    parser.add_argument("--stream-rate", type=float, default=20.0, help="events/s during the latency stream")
    parser.add_argument("--stream-seconds", type=float, default=30.0)
    parser.add_argument("--no-daemon", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (daemon log, Dagster home)")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="flokit-bench-webhooks-"))
    url = os.environ.get("FLOKIT_TEST_POSTGRES_URL") or f"sqlite:///{tmp / 'data' / 'flokit.db'}"
    settings = Settings(data_dir=tmp / "data", database_url=url, webhooks_allow_private=True, sensor_interval_s=1)
    db = Database(url)
    migrate.upgrade(db)
    with db.write() as conn:
        ws = bootstrap(conn, name="Bench")["workspace_id"]
    backend = "PostgreSQL" if url.startswith("postgresql") else "SQLite"
    print(f"webhooks benchmark: {args.deliveries} deliveries, operational DB {backend}, {os.cpu_count()} cores")
    try:
        receiver = RemoteReceiver()
        try:
            rate = baseline(receiver, args.deliveries)
            print(f"baseline  direct signed sends, 32 threads, no DB/Dagster: {rate:8.0f} deliveries/s")
            rate, runs = in_process(settings, db, ws, receiver, args.deliveries)
            print(f"in-process sensor + job (execute_in_process), {runs} run(s): {rate:8.0f} deliveries/s")
            if not args.no_daemon:
                figures = with_daemon(
                    settings, db, ws, receiver, args.deliveries, args.stream_rate, args.stream_seconds
                )
                print(
                    f"daemon    stream {figures['stream_sent']:.0f} events at {args.stream_rate:g}/s: "
                    f"enqueue-to-receipt p50 {figures['p50_s']:.2f} s, p99 {figures['p99_s']:.2f} s, "
                    f"max {figures['max_s']:.2f} s ({figures['stream_received']:.0f} received)"
                )
                print(
                    f"daemon    burst of {figures['burst']:.0f} (enqueued in {figures['burst_enqueue_s']:.1f} s): "
                    f"{figures['burst_rate_from_enqueue']:.0f} deliveries/s from enqueue start to last receipt, "
                    f"{figures['burst_rate_first_to_last_receipt']:.0f}/s first to last receipt, "
                    f"p50 {figures['burst_p50_s']:.2f} s ({figures['burst_received']:.0f} received)"
                )
                print(
                    f"daemon    backlog of {args.deliveries} released at once (endpoint enabled): "
                    f"{figures['backlog_rate_from_release']:.0f} deliveries/s from release to last receipt, "
                    f"first receipt {figures['backlog_first_receipt_s']:.2f} s after release "
                    f"({figures['backlog_received']:.0f} received)"
                )
        finally:
            receiver.close()
    finally:
        db.dispose()
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
