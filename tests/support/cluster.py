"""FloKit "hosts" that share no directory, on the distributed parts of scripts/with-cluster.sh.

Each host is a directory of its own holding its data directory (`data/`, with its DAGSTER_HOME)
and its temp directory (`tmp/`, where the lake cache lives); the checkout is the only path they
share. A host runs `flokit serve <role>` processes (`Role`), each in a session of its own so that
`kill_host` can take it down whole, as a lost machine would go.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from tests.support import BIN, ROOT, wait_for
from warehouse.settings import Settings


def fresh_redis_databases(first: int, count: int) -> list[str]:
    """The URLs of `count` emptied databases from number `first` on scripts/with-redis.sh's server
    (FLOKIT_TEST_REDIS_URL): a deployment's broker, results and rate limits of its own."""
    import redis

    server = os.environ["FLOKIT_TEST_REDIS_URL"].rsplit("/", 1)[0]
    urls = [f"{server}/{number}" for number in range(first, first + count)]
    for url in urls:
        client = redis.Redis.from_url(url)
        client.flushdb()
        client.close()
    return urls


def xdist_worker_number() -> int:
    return int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)


@dataclass(frozen=True)
class Host:
    name: str
    root: Path
    env: dict[str, str]

    @property
    def data_dir(self) -> Path:
        return self.root / "data"


def host(base: Path, name: str, env: Mapping[str, str]) -> Host:
    """A host's directories and environment: the deployment's settings, its own data and temp dirs."""
    root = base / name
    (root / "tmp").mkdir(parents=True, exist_ok=True)
    own = {**env, "FLOKIT_DATA_DIR": str(root / "data"), "TMPDIR": str(root / "tmp")}
    own.pop("DAGSTER_HOME", None)
    return Host(name, root, own)


@dataclass
class Role:
    name: str
    process: subprocess.Popen[str]
    log: Path
    env: dict[str, str]

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_ready(self, timeout: float = 120) -> None:
        wait_for(lambda: "\nready\n" in self.output(), timeout, f"{self.name} ready:\n{self.output()}", self.process)

    def kill_host(self) -> None:
        """SIGKILL to the role and to its supervised children's process groups: the host is lost."""
        import psutil

        kids = psutil.Process(self.process.pid).children()
        os.killpg(self.process.pid, signal.SIGKILL)
        for kid in kids:
            try:
                os.killpg(kid.pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
        self.process.wait(timeout=10)


@contextmanager
def serve(on: Host, *args: str, label: str | None = None) -> Iterator[Role]:
    """`flokit serve *args` on a host, stopped (SIGTERM, then SIGKILL) when the block ends."""
    name = label or f"{on.name}-{args[0]}"
    log = on.root / f"{name}.out"
    with log.open("w") as out:
        process = subprocess.Popen(
            [str(BIN / "flokit"), "serve", *args],
            cwd=ROOT,
            env=on.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    role = Role(name, process, log, on.env)
    try:
        yield role
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def flokit(on: Host, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`flokit *args` as a process on a host (an operator's shell there)."""
    return subprocess.run(
        [str(BIN / "flokit"), *args], cwd=ROOT, env=on.env, capture_output=True, text=True, timeout=timeout, check=False
    )


@contextmanager
def instance_of(role: Role) -> Iterator[dg.DagsterInstance]:
    """The Dagster instance a role's host uses (its generated dagster.yaml names these variables)."""
    settings = Settings.from_env(role.env)
    assert settings.dagster_database_url is not None
    names = ("FLOKIT_DAGSTER_DATABASE_URL", "FLOKIT_CELERY_BROKER_URL", "FLOKIT_CELERY_RESULT_URL")
    saved = {k: os.environ.get(k) for k in names}
    os.environ.update({k: v for k, v in settings.child_env().items() if k in names and v})
    try:
        with dg.DagsterInstance.from_config(str(Path(role.env["FLOKIT_DATA_DIR"]) / "dagster")) as instance:
            yield instance
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
