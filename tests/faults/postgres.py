"""A private PostgreSQL cluster that a fault test may stop, crash and start again.

The suite's shared cluster (`scripts/with-postgres.sh`) serves every other test at once, so no
test may take it down. A fault test starts its own, configured as production must be
(`fsync=on`, `synchronous_commit=on`, `full_page_writes=on`: see README "Production"), so that
what it measures about lost or duplicated events holds for a real deployment.

As root (CI, these machines) the cluster runs as the `postgres` user, as the script's does.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from tests.support import free_port

# Exactly the durability settings the README's production section requires.
DURABLE = {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}


def _bindir() -> Path:
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.access(f"{candidate}/initdb", os.X_OK) and os.access(f"{candidate}/pg_ctl", os.X_OK):
            return Path(candidate)
    raise RuntimeError("no PostgreSQL server binaries; run the suite through scripts/with-postgres.sh")


class PrivateCluster:
    """initdb + pg_ctl on a free port under a private directory; `stop`, `crash` and `start`
    may be called any number of times; `url` is the SQLAlchemy form, `dsn` the libpq form."""

    def __init__(self) -> None:
        self.bindir = _bindir()
        self.root = Path(tempfile.mkdtemp(prefix="flokit-fault-pg."))
        self.root.chmod(0o755)
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = free_port()
        self._runas: list[str] = []
        if os.getuid() == 0:
            subprocess.run(
                ["useradd", "--system", "--home-dir", "/var/lib/postgresql", "--shell", "/bin/bash", "postgres"],
                check=False,
                capture_output=True,
            )
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self._runas = ["runuser", "-u", "postgres", "--"]
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run([*self._runas, str(self.bindir / tool), *args], check=True, capture_output=True)

    def start(self) -> None:
        options = " ".join(f"-c {k}={v}" for k, v in DURABLE.items())
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-w",
            "-t",
            "60",
            "-o",
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c max_connections=200 {options}",
            "start",
        )

    def stop(self) -> None:
        """A clean shutdown that ends every session (what an operator's restart does)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def crash(self) -> None:
        """SIGKILL to every process of the cluster at once, as a machine or OOM crash would: no
        checkpoint, unflushed WAL buffers lost, no goodbye to clients. The next start replays
        the WAL, so exactly what was acknowledged as committed (with `synchronous_commit=on`)
        comes back. The lock files are cleared here because this sandbox's init does not reap
        the killed postmaster, and PostgreSQL takes a zombie's pid for a running server."""
        for pid in _cluster_pids(self.data):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while _cluster_pids(self.data) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _cluster_pids(self.data), "the cluster's processes did not die"
        for stale in [self.data / "postmaster.pid", *self.root.glob(".s.PGSQL.*")]:
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()

    def setting(self, name: str) -> str:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            row = conn.execute(f"SHOW {name}").fetchone()  # a name from our own code, not input
        assert row is not None
        return str(row[0])

    def remove(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError, FileNotFoundError):
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


def _cluster_pids(data: Path) -> list[int]:
    """Live (not zombie) processes working in this data directory: the postmaster and every
    backend and auxiliary process it started (each runs with the data directory as its cwd)."""
    target, found = str(data), []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                if os.readlink(proc / "cwd") == target:
                    found.append(int(proc.name))
    return found


@contextmanager
def private_cluster() -> Iterator[PrivateCluster]:
    cluster = PrivateCluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.remove()
