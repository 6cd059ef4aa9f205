"""A host's cache of lake files from the object store, by key.

An object lake never rewrites a key (warehouse/object_lake.py: each write is a new version), so
a file fetched once stays right for good: no validation, no expiry, only eviction for space.
A writer puts what it uploads here too, so the next asset of the same run (which reads what the
last one wrote) reads it from local disk; another host fetches each file once, whole, in one
GET, several at a time, instead of Polars' ranged reads of every footer and column chunk on every
scan (tests/bench/scale.py measured the difference: docs/benchmarks.md).

Processes of one host share the directory: files arrive under a temp name and are renamed in;
eviction spares files used in the last ten minutes, so a scan never loses a file it resolved.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from warehouse.objects import ObjectStore

DEFAULT_BYTES = 4 * 1024**3
_IN_USE_S = 600
_EVICT_EVERY_S = 30.0
_FETCHERS = 8


class LakeCache:
    def __init__(self, store: ObjectStore, directory: Path, *, max_bytes: int = DEFAULT_BYTES) -> None:
        self.store = store
        self.directory = directory
        self.max_bytes = max_bytes
        self._last_evicted = 0.0
        self._lock = threading.Lock()

    def path(self, key: str) -> Path:
        return self.directory / key

    def files(self, keys: Iterable[str]) -> list[Path]:
        """Local paths of these objects, fetched (concurrently) when not here yet."""
        wanted = list(keys)
        missing = [key for key in dict.fromkeys(wanted) if not self._touch(self.path(key))]
        if missing:
            with ThreadPoolExecutor(max_workers=min(_FETCHERS, len(missing))) as pool:
                list(pool.map(self._fetch, missing))
            self._evict_now_and_then()
        return [self.path(key) for key in wanted]

    def add(self, key: str, data: bytes) -> None:
        """Keep a file this host just wrote (it is what the next reader of the run asks for)."""
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        try:
            tmp.write_bytes(data)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        self._evict_now_and_then()

    def read(self, key: str) -> bytes:
        return self.files([key])[0].read_bytes()

    def _fetch(self, key: str) -> None:
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        try:
            self.store.download(key, tmp)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)

    @staticmethod
    def _touch(path: Path) -> bool:
        """Mark a cached file used now (eviction takes the least recently used); False if absent."""
        try:
            os.utime(path)
            return True
        except FileNotFoundError:
            return False

    def _evict_now_and_then(self) -> None:
        with self._lock:
            if time.monotonic() - self._last_evicted < _EVICT_EVERY_S:
                return
            self._last_evicted = time.monotonic()
        self.evict()

    def evict(self) -> int:
        """Delete the least recently used files until the cache is under 80 % of its size, sparing
        those used in the last ten minutes. Returns the bytes freed."""
        entries = []
        for root, _dirs, names in os.walk(self.directory):
            for name in names:
                if name.endswith(".tmp"):
                    continue
                try:
                    stat = os.stat(os.path.join(root, name))
                except FileNotFoundError:
                    continue
                entries.append((stat.st_mtime, stat.st_size, os.path.join(root, name)))
        total = sum(size for _, size, _ in entries)
        if total <= self.max_bytes:
            return 0
        freed, target, cutoff = 0, total - int(self.max_bytes * 0.8), time.time() - _IN_USE_S
        for used, size, name in sorted(entries):
            if freed >= target or used > cutoff:
                break
            try:
                os.unlink(name)
                freed += size
            except FileNotFoundError:
                continue
        return freed
