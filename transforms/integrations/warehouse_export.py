"""`warehouse` (the customer's S3 bucket, and Snowflake): the export's decisions, which lake partitions
to send again, where they go in the customer's bucket, and the Snowflake statements that load them.
No I/O here: the lake is read in `warehouse/integrations/export.py`, S3 and Snowflake are called by
`clients/warehouse_export.py` and `clients/snowflake.py`, on the orders of
`orchestration/syncs/connectors/warehouse_export.py`.

Layout in the bucket: a daily dataset's day `D` is `<prefix>/<dataset>/date=D/part.parquet`, the
lake's own layout, so a Hive-partitioned reader (Snowflake external tables, Athena, DuckDB with
`hive_partitioning`) gets the day as a column. A whole-table dataset (`payback`, `cohort_curves`,
`ltv`) is `<prefix>/<dataset>/data.parquet`, one object replaced whole: it is a snapshot of every
cohort, not a day's rows, so filing it under `date=<export day>` would leave a reader of
`<dataset>/**` summing every past snapshot, and old snapshots would have to be deleted by
someone. One key, replaced by one PUT (atomic per object in S3), is what the lake does too.

Changed-partition detection: per dataset and day (or `table`), the target's state keeps the lake
file's `mtime_ns` and size when it was last looked at, and a SHA-256 of the Parquet this
workspace's rows made. An untouched file is not even read. A rewritten file is read, but sent
only if this workspace's rows changed: the lake holds every workspace's rows in one file, so
another tenant's late event (or a refresh marking a day stale) rewrites the file without
changing anything of ours.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

import polars as pl

STATE_KEY = "exported"  # state: {dataset: {"YYYY-MM-DD" | TABLE: [mtime_ns, size, digest]}}
DESTINATION_KEY = "destination"  # state: where the exported partitions went (see `follow_destination`)
TABLE = "table"  # the state slot of a whole-table dataset
NO_ROWS = ""  # digest of a partition holding no row of the workspace (nothing exported)
PART_FILE = "part.parquet"
TABLE_FILE = "data.parquet"
# The column the Snowflake tables of daily datasets carry: the lake day the row was exported
# with, so re-exporting a day replaces exactly that day's rows (the daily datasets have no
# common day column: canonical_events is filed by occurred_at's UTC day, payback_daily by
# cohort_date + day).
PARTITION_COLUMN = "partition_date"


@dataclass(frozen=True)
class Partition:
    """One lake file of an exported dataset as it is now: `day` is None for a whole table."""

    dataset: str
    day: date | None
    mtime_ns: int
    size: int

    @property
    def slot(self) -> str:
        return self.day.isoformat() if self.day is not None else TABLE


def to_look_at(partitions: Iterable[Partition], state: Mapping[str, Any]) -> list[Partition]:
    """The partitions whose lake file changed (or is new) since the last export looked at it."""
    seen: Mapping[str, Any] = state.get(STATE_KEY, {})
    out = []
    for p in partitions:
        known = seen.get(p.dataset, {}).get(p.slot)
        if known is None or known[0] != p.mtime_ns or known[1] != p.size:
            out.append(p)
    return out


def follow_destination(state: dict[str, Any], destination: str) -> bool:
    """Forget every exported partition when the export now goes elsewhere (another bucket or
    prefix, a Snowflake account added): the new place has none of them. True if it was reset."""
    moved = state.get(DESTINATION_KEY) not in (None, destination)
    if moved:
        state.pop(STATE_KEY, None)
    state[DESTINATION_KEY] = destination
    return moved


def destination_id(endpoint: str, bucket: str, prefix: str, snowflake: tuple[str | None, ...] = ()) -> str:
    """The identity of an export's destination, as kept in the state."""
    where = f"{endpoint.rstrip('/')}/{bucket}/{prefix.strip('/')}"
    return where + ("|snowflake:" + ".".join(p or "" for p in snowflake) if any(snowflake) else "")


def previous_digest(state: Mapping[str, Any], partition: Partition) -> str | None:
    """What was exported of this partition last time (NO_ROWS: nothing), None if never looked at."""
    known = state.get(STATE_KEY, {}).get(partition.dataset, {}).get(partition.slot)
    return None if known is None else str(known[2])


def record(state: dict[str, Any], partition: Partition, digest: str) -> None:
    state.setdefault(STATE_KEY, {}).setdefault(partition.dataset, {})[partition.slot] = [
        partition.mtime_ns,
        partition.size,
        digest,
    ]


def digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def object_key(prefix: str, dataset: str, day: date | None) -> str:
    """Where a partition goes in the bucket (see the module docstring for the layout)."""
    parts = [p for p in prefix.strip("/").split("/") if p]
    parts.append(dataset)
    parts.extend([f"date={day.isoformat()}", PART_FILE] if day is not None else [TABLE_FILE])
    return "/".join(parts)


# Snowflake column types for the lake's Polars types: VARCHAR, DATE and FLOAT as they are;
# timestamps are UTC instants (TIMESTAMP_TZ keeps the offset explicit); integers as NUMBER(38,0),
# Snowflake's one integer type (INTEGER is its synonym).
def snowflake_type(dtype: pl.DataType) -> str:
    if dtype == pl.String():
        return "VARCHAR"
    if dtype == pl.Date():
        return "DATE"
    if isinstance(dtype, pl.Datetime):
        return "TIMESTAMP_TZ" if dtype.time_zone else "TIMESTAMP_NTZ"
    if dtype.is_integer():
        return "NUMBER(38,0)"
    if dtype.is_float():
        return "FLOAT"
    if dtype == pl.Boolean():
        return "BOOLEAN"
    raise ValueError(f"no Snowflake type for {dtype}")


def _name(identifier: str) -> str:
    """A lake name as a Snowflake identifier: quoted, uppercase, so `SELECT event_id FROM
    canonical_events` finds it (Snowflake folds unquoted names to uppercase) and a column named
    like a keyword (`value`, `day`) is still a column."""
    if not identifier.replace("_", "").isalnum() or not identifier.isascii():
        raise ValueError(f"not a plain identifier: {identifier!r}")
    return '"' + identifier.upper() + '"'


@dataclass(frozen=True)
class SnowflakeLoad:
    """The statements that make one partition's rows this workspace's rows of that day (or of
    the whole table) in Snowflake: run `create`, then `delete` and `insert` in one transaction."""

    create: str
    delete: str
    delete_params: tuple[Any, ...]
    insert: str
    columns: tuple[str, ...]  # the frame's columns, in the order `insert` binds them


def snowflake_load(
    dataset: str, schema: Mapping[str, pl.DataType], workspace_id: str, day: date | None
) -> SnowflakeLoad:
    table = _name(dataset)
    columns = [(_name(c), snowflake_type(t)) for c, t in schema.items()]
    if day is not None:
        columns.append((_name(PARTITION_COLUMN), "DATE"))
    ddl = ", ".join(f"{name} {kind}" for name, kind in columns)
    names = ", ".join(name for name, _ in columns)
    marks = ", ".join(["%s"] * len(columns))
    where = f"{_name('workspace_id')} = %s"
    params: tuple[Any, ...] = (workspace_id,)
    if day is not None:
        where += f" AND {_name(PARTITION_COLUMN)} = %s"
        params = (workspace_id, day)
    return SnowflakeLoad(
        create=f"CREATE TABLE IF NOT EXISTS {table} ({ddl})",
        delete=f"DELETE FROM {table} WHERE {where}",  # noqa: S608 (quoted, checked identifiers)
        delete_params=params,
        insert=f"INSERT INTO {table} ({names}) VALUES ({marks})",  # noqa: S608 (quoted, checked identifiers)
        columns=tuple(schema),
    )


def insert_rows(frame: pl.DataFrame, day: date | None) -> list[tuple[Any, ...]]:
    """The frame's rows as bind values, with the partition day last for a daily dataset."""
    rows = frame.rows()
    return rows if day is None else [(*row, day) for row in rows]
