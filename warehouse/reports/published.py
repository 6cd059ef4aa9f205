"""The published report store across hosts: one copy in the object store, one local copy per host.

On one host the `published_reports` asset builds `reports.duckdb` in the data directory and the
API reads it there. With the lake in an object store, API hosts share no disk with the worker that
built it, so the asset also uploads the file under a new key, `reports/v=<id>/reports.duckdb`, and
then replaces the pointer `reports/current.json` (one PUT: every host sees the old or the new
version). Each host keeps its `DataPaths.reports` in step with the pointer (`ReportCopy.sync`):
one conditional GET of the pointer (a 304 while nothing changed), and on a change a download
under a temp name, fsync, `os.replace`; the API's `ReportReader` notices the new inode and reopens.
A host whose store is unreachable keeps serving the copy it has.

The pointer keeps the versions it replaced for an hour (a host may still be downloading one),
then deletes them.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

from warehouse.lake import Lake
from warehouse.objects import ObjectStore, StoreUnavailable
from warehouse.paths import DataPaths
from warehouse.reports import serving

POINTER = "reports/current.json"
RETAIN_NS = 3600 * 10**9
POLL_S = 2.0  # a publish reaches every host within the poll, the download and the open (< 10 s)
_SIDE = ".published.json"  # next to the local copy: which version it is


@dataclass(frozen=True)
class Version:
    key: str
    generated_at: str
    published_at: str


def build_and_publish(
    paths: DataPaths, lake: Lake, *, generated_at: datetime, as_of: date | None
) -> tuple[dict[str, int], str]:
    """Build the report store from the lake and make it the published one. Returns the rows per
    table and where it was published. In an object store, the file is uploaded before it replaces
    this host's copy, so a failed upload leaves the copy as the published version."""
    store = paths.object_store()
    if store is None:
        return serving.publish(paths.reports, lake, generated_at=generated_at, as_of=as_of), str(paths.reports)
    built = paths.reports.with_name(f".reports.{uuid.uuid4().hex}.build.duckdb")
    try:
        counts = serving.publish(built, lake, generated_at=generated_at, as_of=as_of)
        version = publish(store, built, generated_at=generated_at)
        os.replace(built, paths.reports)
        _record(paths.reports, version)
    finally:
        built.unlink(missing_ok=True)
    return counts, store.url(version.key)


def publish(store: ObjectStore, built: Path, *, generated_at: datetime) -> Version:
    """Upload the store built at `built` (this host's `DataPaths.reports`) and make it current."""
    key = f"reports/v={time.time_ns():x}-{uuid.uuid4().hex[:12]}/reports.duckdb"
    store.put(key, built)
    version = Version(key, generated_at.isoformat(), datetime.now().astimezone().isoformat())
    for _ in range(50):
        blob = store.get(POINTER)
        doc: dict[str, Any] = json.loads(blob.data) if blob else {"retired": []}
        retired = [(k, int(at)) for k, at in doc.get("retired", [])]
        if "key" in doc:
            retired.append((doc["key"], time.time_ns()))
        cutoff = time.time_ns() - RETAIN_NS
        for old, at in retired:
            if at < cutoff:
                store.delete(old)
        body = json.dumps(
            {**version.__dict__, "retired": [[k, at] for k, at in retired if at >= cutoff]}, indent=1
        ).encode()
        if (store.create(POINTER, body) if blob is None else store.swap(POINTER, body, blob.etag)) is not None:
            return version
    raise StoreUnavailable(f"{store.url(POINTER)} kept changing: 50 publishes in a row")


@dataclass(frozen=True)
class SyncResult:
    changed: bool  # a new version was downloaded
    version: Version | None  # the version the local copy holds (None: no copy)
    error: str | None = None  # the store could not be read (the copy, if any, is kept)
    bytes_downloaded: int = 0


class ReportCopy:
    """This host's copy of the published reports (`DataPaths.reports`), kept in step with the store."""

    def __init__(self, paths: DataPaths, store: ObjectStore) -> None:
        self.path = paths.reports
        self.store = store
        self._etag: str | None = None  # the pointer's ETag this process last read
        self._lock = threading.Lock()

    def local_version(self) -> Version | None:
        try:
            doc = json.loads(self.path.with_name(self.path.name + _SIDE).read_text())
            return Version(doc["key"], doc["generated_at"], doc["published_at"]) if self.path.is_file() else None
        except (FileNotFoundError, ValueError, KeyError):
            return None

    def sync(self) -> SyncResult:
        """Download the current version if this host does not hold it. Never raises for an
        unreachable store: the result says so and the copy stays."""
        with self._lock:
            have = self.local_version()
            try:
                blob = self.store.get_if_changed(POINTER, self._etag if have else None)
                if blob is None or not blob.etag:
                    return SyncResult(False, have)
                pointer = json.loads(blob.data)
                wanted = Version(pointer["key"], pointer["generated_at"], pointer["published_at"])
                if have is not None and have.key == wanted.key:
                    self._etag = blob.etag
                    return SyncResult(False, have)
                size = self._download(wanted)
                self._etag = blob.etag
                return SyncResult(True, wanted, bytes_downloaded=size)
            except StoreUnavailable as exc:
                return SyncResult(False, have, error=str(exc))

    def _download(self, version: Version) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # One download per host, however many API workers notice the change at once.
        with _host_lock(self.path.with_name(self.path.name + ".sync.lock")):
            have = self.local_version()
            if have is not None and have.key == version.key:
                return 0
            tmp = self.path.with_name(f".{self.path.name}.{uuid.uuid4().hex}.tmp")
            try:
                size = self.store.download(version.key, tmp)
                os.replace(tmp, self.path)
            finally:
                tmp.unlink(missing_ok=True)
            _record(self.path, version)
            return size


def _record(path: Path, version: Version) -> None:
    side = path.with_name(path.name + _SIDE)
    tmp = side.with_name(f".{side.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps(version.__dict__))
    os.replace(tmp, side)


class _host_lock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = -1

    def __enter__(self) -> None:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *_exc: object) -> None:
        os.close(self.fd)


def current_reports(paths: DataPaths) -> Path:
    """`DataPaths.reports`, brought up to date first when the reports live in an object store
    (for the daemon's sensors and the runs, which read the published store now and then)."""
    store = paths.object_store()
    if store is not None:
        ReportCopy(paths, store).sync()
    return paths.reports


class Follower:
    """An API process's thread that keeps the host's copy in step (`POLL_S`), started after fork."""

    def __init__(self, copy: ReportCopy, log: Callable[[str], None], poll_s: float = POLL_S) -> None:
        self.copy = copy
        self.log = log
        self.poll_s = poll_s
        self.last = copy.sync()
        self._in_outage = False
        self._report(self.last)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="flokit-reports-follower", daemon=True)
        self._thread.start()

    def not_ready(self) -> str | None:
        """Why this host cannot serve reports: the store is unreachable and it holds no copy."""
        last = self.last
        return last.error if last.version is None and last.error else None

    def stop(self) -> None:
        """End the thread after its current round (for a test or a process that keeps running)."""
        self._stopped.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stopped.wait(self.poll_s):
            self.last = self.copy.sync()
            self._report(self.last)

    def _report(self, result: SyncResult) -> None:
        if result.changed and result.version:
            self.log(f"published reports {result.version.key} ({result.bytes_downloaded} bytes) now served")
        # Once when an outage begins and once when it ends: the error's text differs from one
        # attempt to the next (the client names how long it tried), so it is not what is compared.
        if (result.error is not None) != self._in_outage:
            self._in_outage = result.error is not None
            kept = f"; serving {result.version.key}" if result.version else "; no copy to serve yet"
            self.log(
                f"object store unreachable: {result.error}{kept}" if result.error else "object store reachable again"
            )
