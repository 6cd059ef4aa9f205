"""Helpers shared by tests: free ports, waiting for real servers, running real processes."""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
from werkzeug.serving import make_server

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def built_once(tmp_path_factory: Any, name: str, build: Callable[[Path], None]) -> Path:
    """`build(root)` run once per test run, whichever pytest-xdist worker needs it first; the
    others wait for it and use the same `root` (in the run's common temporary directory). A slow
    world (a seeded, refreshed demo) is built once this way and each test copies it by file
    instead of building its own. `build` ends by writing `root/done`; a build that failed half-way
    is started again by the next worker that asks."""
    worker_dir = tmp_path_factory.getbasetemp()
    shared = worker_dir.parent if os.environ.get("PYTEST_XDIST_WORKER") else worker_dir
    root = shared / name
    with (shared / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (root / "done").is_file():
            if root.exists():
                shutil.rmtree(root)
            root.mkdir(parents=True)
            build(root)
            (root / "done").write_text("")
    return root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(check: Callable[[], bool], timeout: float, what: str, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise AssertionError(f"{what}: process exited with {process.returncode}")
        try:
            if check():
                return
        except (requests.ConnectionError, requests.Timeout):
            pass
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def http_ok(url: str) -> Callable[[], bool]:
    return lambda: requests.get(url, timeout=2).status_code == 200


@contextmanager
def live_server(app: Any) -> Iterator[str]:
    """A real threaded HTTP server on 127.0.0.1 serving `app`; yields its base URL."""
    with serving(make_server("127.0.0.1", 0, app, threaded=True)) as base:
        yield base


@contextmanager
def serving(server: Any) -> Iterator[str]:
    """Run a bound `socketserver`-style server (serve_forever/shutdown) in a thread; yields its
    base URL and stops it, waiting for the thread, on exit."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()


@dataclass
class GunicornServer:
    base: str
    process: subprocess.Popen[bytes]
    stderr: Path  # gunicorn's error log, complete once the context has exited


@contextmanager
def gunicorn_server(env: dict[str, str], *, workers: int, log_dir: Path) -> Iterator[GunicornServer]:
    """gunicorn serving `api.app:create_app()` with `env` on a free port, ready (/healthz answers);
    stopped with SIGTERM and waited for on exit, so callers can check it shut down cleanly."""
    port = free_port()
    stderr = log_dir / f"gunicorn-{port}.log"
    argv = [
        *[str(BIN / "gunicorn"), "--config", str(ROOT / "api" / "gunicorn_conf.py")],  # as `flokit up` runs it
        *["--bind", f"127.0.0.1:{port}", "--workers", str(workers), "api.app:create_app()"],
    ]
    with stderr.open("wb") as sink:
        process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=sink)
        server = GunicornServer(f"http://127.0.0.1:{port}", process, stderr)
        try:
            wait_for(http_ok(f"{server.base}/healthz"), 30, "gunicorn /healthz", process)
            yield server
        finally:
            process.terminate()
            process.wait(timeout=30)


def run_together(*calls: Callable[[], Any]) -> list[Any]:
    """Run the calls in threads released at the same instant; each call's result or exception."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(i: int, call: Callable[[], Any]) -> None:
        barrier.wait()
        try:
            results[i] = call()
        except Exception as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i, call)) for i, call in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


# The instance key tests seal webhook signing secrets with (warehouse/webhooks/endpoints.py) and
# hand to the delivery run that unseals them.
WEBHOOK_KEY = "w" * 43


def bearer(key: str) -> dict[str, str]:
    """The v1 API's Authorization header for a key."""
    return {"Authorization": f"Bearer {key}"}
