"""The lake in an object store (`FLOKIT_LAKE_URL=s3://bucket/prefix`), for hosts that share no disk.

An object store has no rename, so the local lake's temp-name-and-`os.replace` becomes a pointer
flip (../shared/design/scale-out.md §6):
1. each partition file is written under a fresh key that is never reused,
   `<dataset>/date=YYYY-MM-DD/v=<id>/part.parquet` (a PUT is atomic per object);
2. the dataset's manifest, `<dataset>/_manifest.json`, is then replaced with a conditional PUT
   (`If-Match` the ETag read, or `If-None-Match: *` for the first): the new file is current from
   that moment. Two writers of one dataset cannot lose each other's entries: the loser's PUT gets
   412, it re-reads the manifest and applies its entries again.
Readers resolve partitions from the manifest, never by listing (SeaweedFS lists prefixes of
deleted objects: design §0.10), so they never see a half-written partition, and a re-run writes
a new version and flips the pointer: no append, no duplicate.

Stamps come from a lake-wide clock, `_clock.json`, advanced (by conditional PUT) before each
commit: a write that starts after another's commit ended gets a larger stamp whatever the two
hosts' clocks say, so a late input is always newer than the derived partition written before it.

Replaced files are listed in the manifest as retired and deleted by a later commit once an hour
has passed (longer than any read of them takes).
"""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Any

import polars as pl

from warehouse.lake import PARTITION_FILE, TABLE_FILE, Lake, Partition, T, day_segment, parquet_bytes
from warehouse.lake_cache import LakeCache
from warehouse.objects import ObjectStore

MANIFEST = "_manifest.json"
CLOCK = "_clock.json"
FORMAT = 1
RETIRED_FOR_NS = 3600 * 10**9  # a replaced file outlives any read that resolved it
_ATTEMPTS = 50  # conditional PUTs lost in a row before a writer gives up (each loss is another's success)


class LakeConflict(RuntimeError):
    """A day being written was rewritten by another writer since it was read; `update` runs again."""


class LakeContention(RuntimeError):
    """A manifest or the clock kept changing under a writer for `_ATTEMPTS` tries."""


@dataclass
class Manifest:
    """A dataset's current files (`days`, `table`) and the replaced ones awaiting deletion."""

    days: dict[date, Partition] = field(default_factory=dict)
    table: Partition | None = None
    retired: list[tuple[str, int]] = field(default_factory=list)  # (key, when retired, ns)

    def max_stamp(self) -> int:
        stamps = [p.stamp for p in self.days.values()] + ([self.table.stamp] if self.table else [])
        return max(stamps, default=0)


class ObjectLake(Lake):
    def __init__(self, store: ObjectStore, *, cache: LakeCache | None = None, retain_ns: int = RETIRED_FOR_NS) -> None:
        self.store = store
        self.cache = cache  # this host's copies of the files, by key (warehouse/lake_cache.py)
        self._retain_ns = retain_ns
        # The newest stamp this process has seen: its next stamp is larger still.
        self._seen = 0
        self._cache: dict[str, tuple[str, Manifest]] = {}  # dataset -> (ETag, manifest)
        self._lock = threading.Lock()
        self._guard = threading.local()  # inside `update`: the days' keys as first read

    def __repr__(self) -> str:
        return f"ObjectLake({str(self.store)!r})"

    # -- reading -----------------------------------------------------------------------------

    def days(self, dataset: str) -> dict[date, Partition]:
        return dict(sorted(self._manifest(dataset)[1].days.items()))

    def table(self, dataset: str) -> Partition | None:
        return self._manifest(dataset)[1].table

    def scan(self, partitions: Iterable[Partition], schema: Mapping[str, pl.DataType]) -> pl.LazyFrame:
        """Through the host's cache when there is one: each file fetched once, whole."""
        listed = list(partitions)
        if self.cache is None or not listed:
            return super().scan(listed, schema)
        paths = self.cache.files(self._key(p.location) for p in listed)
        return pl.scan_parquet([str(p) for p in paths], hive_partitioning=False, schema=schema)

    def read_bytes(self, partition: Partition) -> bytes:
        if self.cache is not None:
            return self.cache.read(self._key(partition.location))
        blob = self.store.get(self._key(partition.location))
        if blob is None:
            raise FileNotFoundError(partition.location)
        return blob.data

    def describe(self, dataset: str) -> str:
        return self.store.url(dataset)

    def storage_options(self) -> dict[str, str]:
        return self.store.storage_options()

    # -- writing -----------------------------------------------------------------------------

    def write_days(self, dataset: str, frames: Mapping[date, pl.DataFrame]) -> None:
        if not frames:
            return
        written = {day: self._put(dataset, day_segment(day), PARTITION_FILE, frame) for day, frame in frames.items()}
        guard: dict[date, str | None] | None = getattr(self._guard, "days", {}).get(dataset)

        def apply(manifest: Manifest, stamp: int) -> None:
            for day, (location, size, columns) in written.items():
                current = manifest.days.get(day)
                if guard is not None and (current.location if current else None) != guard.get(day):
                    raise LakeConflict(f"{dataset} {day} was rewritten by another writer")
                if current is not None:
                    manifest.retired.append((self._key(current.location), time.time_ns()))
                manifest.days[day] = Partition(dataset, day, stamp, size, location, columns)

        self._commit(dataset, apply, stamped=True)
        if guard is not None:  # this change's own writes are what it read next
            guard.update({day: location for day, (location, _size, _cols) in written.items()})

    def write_table(self, dataset: str, frame: pl.DataFrame) -> Partition:
        location, size, columns = self._put(dataset, None, TABLE_FILE, frame)
        out: list[Partition] = []

        def apply(manifest: Manifest, stamp: int) -> None:
            if manifest.table is not None:
                manifest.retired.append((self._key(manifest.table.location), time.time_ns()))
            manifest.table = Partition(dataset, None, stamp, size, location, columns)
            out[:] = [manifest.table]

        self._commit(dataset, apply, stamped=True)
        return out[0]

    def mark_stale(self, dataset: str, days: Iterable[date]) -> None:
        wanted = set(days)
        if not wanted:
            return

        def apply(manifest: Manifest, _stamp: int) -> None:
            for day in wanted & set(manifest.days):
                manifest.days[day] = replace(manifest.days[day], stamp=0)

        self._commit(dataset, apply, stamped=False)

    def update(self, dataset: str, change: Callable[[], T]) -> T:
        """Optimistic: the days `change` writes must still hold the files it first read, or the
        commit raises `LakeConflict` and `change` runs again on the newer files."""
        for attempt in range(_ATTEMPTS):
            guards = getattr(self._guard, "days", None)
            if guards is None:
                guards = self._guard.days = {}
            guards[dataset] = {day: p.location for day, p in self.days(dataset).items()}
            try:
                return change()
            except LakeConflict:
                time.sleep(random.uniform(0, 0.05 * (attempt + 1)))  # noqa: S311 (jitter, not a secret)
            finally:
                guards.pop(dataset, None)
        raise LakeContention(f"{dataset}: {_ATTEMPTS} conflicting writers in a row")

    # -- the manifest, the clock ---------------------------------------------------------------

    def _manifest(self, dataset: str) -> tuple[str | None, Manifest]:
        """The dataset's manifest and its ETag (None, empty manifest before the first write).
        A manifest read before is revalidated with one conditional GET."""
        key = f"{dataset}/{MANIFEST}"
        with self._lock:
            cached = self._cache.get(dataset)
        blob = self.store.get_if_changed(key, cached[0] if cached else None)
        if blob is None:
            return cached if cached else (None, Manifest())
        if not blob.etag:  # deleted since
            with self._lock:
                self._cache.pop(dataset, None)
            return None, Manifest()
        manifest = _decode(dataset, blob.data, self.store)
        with self._lock:
            self._cache[dataset] = (blob.etag, manifest)
            self._seen = max(self._seen, manifest.max_stamp())
        return blob.etag, manifest

    def _commit(self, dataset: str, apply: Callable[[Manifest, int], None], *, stamped: bool) -> None:
        stamp = self._next_stamp() if stamped else 0
        key = f"{dataset}/{MANIFEST}"
        for attempt in range(_ATTEMPTS):
            etag, current = self._manifest(dataset)
            manifest = Manifest(dict(current.days), current.table, list(current.retired))
            self._collect(manifest)  # files retired by earlier commits, before this one retires more
            apply(manifest, stamp)
            body = _encode(manifest)
            new_etag = self.store.create(key, body) if etag is None else self.store.swap(key, body, etag)
            if new_etag is not None:
                with self._lock:
                    self._cache[dataset] = (new_etag, manifest)
                return
            time.sleep(random.uniform(0, 0.02 * (attempt + 1)))  # noqa: S311 (jitter, not a secret)
        raise LakeContention(f"{dataset}: the manifest changed under {_ATTEMPTS} commits in a row")

    def _next_stamp(self) -> int:
        """Advance the lake's clock past every stamp written before and return the new value."""
        for _ in range(_ATTEMPTS):
            blob = self.store.get(CLOCK)
            current = int(json.loads(blob.data)["stamp"]) if blob else 0
            stamp = max(time.time_ns(), current + 1, self._seen + 1)
            body = json.dumps({"stamp": stamp}).encode()
            won = self.store.create(CLOCK, body) if blob is None else self.store.swap(CLOCK, body, blob.etag)
            if won is not None:
                with self._lock:
                    self._seen = max(self._seen, stamp)
                return stamp
        raise LakeContention(f"the lake clock {self.store.url(CLOCK)} changed {_ATTEMPTS} times in a row")

    def _collect(self, manifest: Manifest) -> None:
        """Delete the files retired over an hour ago and drop them from the list. Deleting before
        the manifest that forgets them is written is safe: nothing has referenced them for an hour."""
        cutoff = time.time_ns() - self._retain_ns
        kept = []
        for key, retired_at in manifest.retired:
            if retired_at < cutoff:
                self.store.delete(key)
            else:
                kept.append((key, retired_at))
        manifest.retired = kept

    def _put(
        self, dataset: str, segment: str | None, name: str, frame: pl.DataFrame
    ) -> tuple[str, int, tuple[str, ...]]:
        version = f"v={time.time_ns():x}-{uuid.uuid4().hex[:12]}"
        key = "/".join(p for p in (dataset, segment, version, name) if p)
        data = parquet_bytes(frame)
        self.store.put(key, data)
        if self.cache is not None:
            self.cache.add(key, data)
        return self.store.url(key), len(data), tuple(frame.columns)

    def _key(self, location: str) -> str:
        base = self.store.url("") + "/"
        return location.removeprefix(base)


def _encode(manifest: Manifest) -> bytes:
    def entry(p: Partition) -> dict[str, Any]:
        return {"location": p.location, "stamp": p.stamp, "size": p.size, "columns": list(p.columns or ())}

    doc = {
        "format": FORMAT,
        "days": {day.isoformat(): entry(p) for day, p in sorted(manifest.days.items())},
        "table": entry(manifest.table) if manifest.table else None,
        "retired": [[key, at] for key, at in manifest.retired],
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def _decode(dataset: str, data: bytes, store: ObjectStore) -> Manifest:
    doc = json.loads(data)
    if doc.get("format") != FORMAT:
        raise ValueError(f"{store.url(dataset)}/{MANIFEST}: manifest format {doc.get('format')!r}, expected {FORMAT}")

    def partition(day: date | None, entry: dict[str, Any]) -> Partition:
        return Partition(
            dataset, day, int(entry["stamp"]), int(entry["size"]), entry["location"], tuple(entry["columns"])
        )

    days = {date.fromisoformat(d): partition(date.fromisoformat(d), e) for d, e in doc["days"].items()}
    table = partition(None, doc["table"]) if doc.get("table") else None
    return Manifest(days, table, [(str(k), int(at)) for k, at in doc.get("retired", [])])
