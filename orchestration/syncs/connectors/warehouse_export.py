"""`warehouse` (the customer's S3 bucket, and Snowflake): FloKit as a source for the customer's warehouse.

Each sync sends the lake partitions that changed since the last one, this workspace's rows only,
as Parquet to the customer's S3-compatible bucket (`<prefix>/<dataset>/date=YYYY-MM-DD/part.parquet`,
whole tables as `<prefix>/<dataset>/data.parquet`: `transforms/integrations/warehouse_export.py`), and,
when the config names a Snowflake account, replaces the same rows in one Snowflake table per
dataset. A partition is always sent whole, so sending it again is harmless: a failed sync keeps no
state and the next one sends the same partitions again.

The bucket and the Snowflake account are reached through their clients
(`clients/warehouse_export.py`, `clients/snowflake.py`), which say how each vendor's errors are
read; this connector decides what is sent and when.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import polars as pl

from clients.warehouse_export import WarehouseExportClient
from orchestration.syncs.connectors import Connector, Log
from transforms.integrations.kinds import ValidConfig
from transforms.integrations.warehouse_export import (
    NO_ROWS,
    Partition,
    digest,
    follow_destination,
    object_key,
    previous_digest,
    record,
    to_look_at,
)
from warehouse.integrations import export
from warehouse.integrations.target import SyncTarget
from warehouse.lake import parquet_bytes


def client(config: ValidConfig) -> WarehouseExportClient:
    return WarehouseExportClient(
        base_url=config.get("base_url"),
        bucket=config.get("bucket"),
        prefix=config.get("prefix") or "",
        region=config.get("region") or "us-east-1",
        access_key_id=config.get("access_key_id"),
        secret_access_key=config.get("secret_access_key"),
        snowflake_account=config.get("snowflake_account"),
        snowflake_user=config.get("snowflake_user"),
        snowflake_password=config.get("snowflake_password"),
        snowflake_database=config.get("snowflake_database"),
        snowflake_schema=config.get("snowflake_schema"),
        snowflake_warehouse=config.get("snowflake_warehouse"),
        snowflake_role=config.get("snowflake_role"),
        snowflake_url=config.get("snowflake_url"),
    )


def check(api: WarehouseExportClient) -> str:
    found = api.list_one()
    where = f"s3://{api.bucket}/{api.prefix.strip('/')}"
    summary = f"{where} is readable ({'not empty' if found else 'empty'})"
    if api.has_snowflake:
        with api.snowflake() as loader:
            summary += f"; Snowflake {loader.version()} ({api.snowflake_database}.{api.snowflake_schema})"
    return summary


def sync(api: WarehouseExportClient, target: SyncTarget, config: ValidConfig, log: Log) -> None:
    del config  # everything is on the client
    if follow_destination(target.state, api.destination()):
        log("warehouse: the destination changed since the last export; every partition is exported again")
    changed = to_look_at(export.partitions(target.lake), target.state)
    log(f"warehouse: {len(changed)} lake partition(s) changed since the last export")
    if not changed:
        return
    if api.has_snowflake:
        with api.snowflake() as loader:

            def load(partition: Partition, workspace_id: str, frame: pl.DataFrame) -> None:
                loader.replace(partition, export.BY_NAME[partition.dataset].schema, workspace_id, frame)

            _export(api, target, changed, log, load)
    else:
        _export(api, target, changed, log, None)


Load = Callable[[Partition, str, pl.DataFrame], None]


def _export(
    api: WarehouseExportClient, target: SyncTarget, changed: list[Partition], log: Log, load: Load | None
) -> None:
    sent: dict[str, int] = {}
    for partition in changed:
        frame = export.workspace_rows(target.lake, partition, target.workspace_id)
        before = previous_digest(target.state, partition)
        key = object_key(api.prefix, partition.dataset, partition.day)
        if frame.height == 0:
            if before not in (None, NO_ROWS):
                # Rows of this workspace were exported and are gone now (a recomputed day):
                # the partition's whole content is "nothing", so its object and rows go too.
                api.delete(key, log)
                if load is not None:
                    load(partition, target.workspace_id, frame)
            record(target.state, partition, NO_ROWS)
            continue
        body = parquet_bytes(frame)  # written like the lake's own files: same rows, same bytes, same digest
        now = digest(body)
        if now != before:
            api.put(key, body, log)
            if load is not None:
                load(partition, target.workspace_id, frame)
            day = partition.day
            target.exported(frame.height, datetime(day.year, day.month, day.day, tzinfo=UTC) if day else None)
            sent[partition.dataset] = sent.get(partition.dataset, 0) + frame.height
        record(target.state, partition, now)
    for dataset, rows in sent.items():
        log(f"warehouse: exported {rows} row(s) of {dataset}")


CONNECTOR = Connector(type="warehouse", client=client, check=check, sync=sync)
