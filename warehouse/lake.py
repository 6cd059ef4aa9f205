"""The Parquet lake: daily partitions and whole-table files of each dataset, on local disk or in an
object store (`FLOKIT_LAKE_URL`).

Every reader and writer goes through a `Lake`, never through a path: the same assets run on one
host against `<data dir>/lake` (`LocalLake`, the embedded default) and on worker hosts that share
no disk against `s3://bucket/prefix` (`warehouse.object_lake.ObjectLake`). Both promise the same:
- a write replaces a partition whole, and a reader sees the old or the new partition, never a
  torn one; a re-run rewrites, never appends;
- each partition carries a `stamp`, the time it was written on the lake's clock: a derived
  partition older than one of its inputs is stale (warehouse/reports/report_lake.py), and
  `mark_stale` makes one older than any input without touching its rows;
- `update` runs a read-modify-write of a dataset's partitions so that two writers of the same
  dataset (syncs of two workspaces writing one day of spend) never lose each other's rows.
"""

from __future__ import annotations

import fcntl
import io
import os
import re
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TypeVar

import polars as pl

T = TypeVar("T")
PARTITION_FILE = "part.parquet"
TABLE_FILE = "data.parquet"
_DAY_DIR = "date="
_DAY_NAME = re.compile(r"^date=(\d{4}-\d{2}-\d{2})$")


@dataclass(frozen=True)
class Partition:
    """One file of a dataset: a day's partition, or the whole table (`day` None)."""

    dataset: str
    day: date | None
    stamp: int  # when it was written, on the lake's clock (ns); 0 once marked stale
    size: int
    location: str  # what a scan reads: a local path or an s3:// URL
    columns: tuple[str, ...] | None = None  # recorded at write time where the lake keeps them


def parquet_bytes(frame: pl.DataFrame) -> bytes:
    """A frame as the lake stores it: zstd, with column statistics for the readers' pruning (the
    warehouse export sends the same bytes, so the same rows give the same digest)."""
    buffer = io.BytesIO()
    frame.write_parquet(buffer, compression="zstd", statistics=True)
    return buffer.getvalue()


class Lake(ABC):
    """What the assets, the reports and the exports need of the lake, wherever it lives."""

    @abstractmethod
    def days(self, dataset: str) -> dict[date, Partition]:
        """Every day of a daily dataset that has a partition, in day order."""

    @abstractmethod
    def table(self, dataset: str) -> Partition | None:
        """The whole-table file of a dataset (None before its first write)."""

    @abstractmethod
    def write_days(self, dataset: str, frames: Mapping[date, pl.DataFrame]) -> None:
        """Replace the partitions of these days, each whole."""

    @abstractmethod
    def write_table(self, dataset: str, frame: pl.DataFrame) -> Partition:
        """Replace the whole-table file."""

    @abstractmethod
    def mark_stale(self, dataset: str, days: Iterable[date]) -> None:
        """Give these days' partitions stamp 0: older than any input, so the next run recomputes
        them; they keep serving their rows until then."""

    @abstractmethod
    def update(self, dataset: str, change: Callable[[], T]) -> T:
        """Run `change` (which reads and writes days of `dataset` through this lake) so that no
        other writer's change to the days it writes is lost; it may be run again."""

    @abstractmethod
    def read_bytes(self, partition: Partition) -> bytes:
        """The partition's Parquet file, as written."""

    @abstractmethod
    def describe(self, dataset: str) -> str:
        """Where a dataset lives, for people (run metadata, CLI output)."""

    @abstractmethod
    def storage_options(self) -> dict[str, str] | None:
        """What Polars needs to read `Partition.location` (None for local files)."""

    def write_day(self, dataset: str, day: date, frame: pl.DataFrame) -> None:
        self.write_days(dataset, {day: frame})

    def scan(self, partitions: Iterable[Partition], schema: Mapping[str, pl.DataType]) -> pl.LazyFrame:
        """A lazy scan of these partitions with the dataset's schema (typed and empty for none)."""
        locations = [p.location for p in partitions]
        if not locations:
            return pl.LazyFrame(schema=schema)
        return pl.scan_parquet(
            locations, hive_partitioning=False, schema=schema, storage_options=self.storage_options()
        )

    def columns(self, partition: Partition) -> tuple[str, ...]:
        """The partition's columns: recorded at write time, or read from its footer once per stamp."""
        if partition.columns is not None:
            return partition.columns
        key = (partition.location, partition.stamp)
        known = _FOOTERS.get(key)
        if known is None:
            known = _FOOTERS[key] = tuple(pl.read_parquet_schema(partition.location))
        return known


# Columns by (location, stamp): a footer read is ~33 µs locally, and the daemon asks about the
# same files at every tick.
_FOOTERS: dict[tuple[str, int], tuple[str, ...]] = {}


class LocalLake(Lake):
    """The lake under one directory: `<dataset>/date=YYYY-MM-DD/part.parquet` and
    `<dataset>/data.parquet`, each written under a temp name and `os.replace`d over the live one,
    so a crash mid-write leaves only a temp file the next write replaces. The stamp is the file's
    mtime, set from the clock at each write; one host's writers exclude each other with `flock`."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __repr__(self) -> str:
        return f"LocalLake({str(self.root)!r})"

    def dataset_dir(self, dataset: str) -> Path:
        return self.root / dataset

    def partition_path(self, dataset: str, day: date) -> Path:
        return self.dataset_dir(dataset) / f"{_DAY_DIR}{day.isoformat()}" / PARTITION_FILE

    def table_path(self, dataset: str) -> Path:
        """An unpartitioned dataset: one file."""
        return self.dataset_dir(dataset) / TABLE_FILE

    def glob(self, dataset: str) -> str:
        return str(self.dataset_dir(dataset) / "**" / "*.parquet")

    def write(self, frame: pl.DataFrame, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        try:
            frame.write_parquet(tmp, compression="zstd", statistics=True)
            # The stamp is the clock's nanoseconds, not the filesystem's: its mtime ticks every few
            # ms (the kernel's timer), so a late input written within one tick of the derived day
            # read before it would carry the same stamp and look already read.
            now = time.time_ns()
            os.utime(tmp, ns=(now, now))
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return path

    def days(self, dataset: str) -> dict[date, Partition]:
        root = self.dataset_dir(dataset)
        out: dict[date, Partition] = {}
        if root.is_dir():
            for child in root.iterdir():
                day = _day_of(child.name)
                if day is None:
                    continue
                try:
                    stat = (child / PARTITION_FILE).stat()
                except FileNotFoundError:
                    continue
                out[day] = Partition(dataset, day, stat.st_mtime_ns, stat.st_size, str(child / PARTITION_FILE))
        return dict(sorted(out.items()))

    def table(self, dataset: str) -> Partition | None:
        path = self.table_path(dataset)
        try:
            stat = path.stat()
        except FileNotFoundError:
            return None
        return Partition(dataset, None, stat.st_mtime_ns, stat.st_size, str(path))

    def write_days(self, dataset: str, frames: Mapping[date, pl.DataFrame]) -> None:
        for day, frame in frames.items():
            self.write(frame, self.partition_path(dataset, day))

    def write_table(self, dataset: str, frame: pl.DataFrame) -> Partition:
        self.write(frame, self.table_path(dataset))
        written = self.table(dataset)
        assert written is not None  # just written
        return written

    def mark_stale(self, dataset: str, days: Iterable[date]) -> None:
        for day in days:
            path = self.partition_path(dataset, day)
            if path.is_file():
                os.utime(path, ns=(0, 0))

    def update(self, dataset: str, change: Callable[[], T]) -> T:
        with self._locked(dataset):
            return change()

    def read_bytes(self, partition: Partition) -> bytes:
        return Path(partition.location).read_bytes()

    def describe(self, dataset: str) -> str:
        return str(self.dataset_dir(dataset))

    def storage_options(self) -> None:
        return None

    @contextmanager
    def _locked(self, dataset: str) -> Iterator[None]:
        directory = self.dataset_dir(dataset)
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(directory / ".writer.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock


def _day_of(name: str) -> date | None:
    """The day of a `date=YYYY-MM-DD` directory or key segment (None for anything else)."""
    match = _DAY_NAME.match(name)
    try:
        return date.fromisoformat(match.group(1)) if match else None
    except ValueError:  # date=2026-02-30
        return None


def day_segment(day: date) -> str:
    return f"{_DAY_DIR}{day.isoformat()}"
