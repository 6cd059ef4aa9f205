"""The `warehouse` connector: FloKit as a source for the customer's warehouse.

Each sync sends the lake partitions that changed since the last one, this workspace's rows only,
as Parquet to the customer's S3-compatible bucket (`<prefix>/<dataset>/date=YYYY-MM-DD/part.parquet`,
whole tables as `<prefix>/<dataset>/data.parquet`: `transforms/integrations/warehouse.py`), and,
when the config names a Snowflake account, replaces the same rows in one Snowflake table per
dataset. A partition is always sent whole, so sending it again is harmless: a failed sync keeps no
state and the next one sends the same partitions again.

S3 is reached with boto3 (`endpoint_url` = the integration's `base_url`), with the retries and
the reading of S3's errors every S3 connector shares (`clients/s3.py`): refused
credentials are `auth` with S3's own message, a missing or misnamed bucket `config`, throttling
`rate_limited`, other 5xx and unreachable endpoints `provider_error`.

Snowflake is reached with `snowflake-connector-python` (`snowflake.connector.connect`, read as a
module attribute so that fakesnow's patch reaches it in tests). A refused login is a
`DatabaseError` whose sqlstate is 28000 (the connector's CREDENTIAL_REJECTION_GS_CODES, e.g.
390100 "Incorrect username or password was specified."): `auth`; a 403 on login (an unknown
account) and SQL refusals (a database, schema or privilege missing) are `config`; the rest is
`provider_error`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar
from urllib.parse import urlsplit

import polars as pl
import snowflake.connector
import snowflake.connector.errors as sf_errors

from clients import s3
from orchestration.syncs.connectors import Connector, Log
from transforms.integrations.errors import MAX_PROVIDER_TEXT, SyncFailure, truncate
from transforms.integrations.kinds import ValidConfig
from transforms.integrations.warehouse import (
    NO_ROWS,
    Partition,
    destination_id,
    digest,
    follow_destination,
    insert_rows,
    object_key,
    previous_digest,
    record,
    snowflake_load,
    to_look_at,
)
from warehouse.integrations import export
from warehouse.integrations.target import SyncTarget

# Rows per INSERT: the connector rewrites an `executemany` INSERT with pyformat parameters into
# one multi-row INSERT (snowflake/connector/cursor.py, "rewriting INSERT query"), and Snowflake
# refuses a list of more than 16,384 expressions (error 001795, seen on a multi-row INSERT in
# elementary-data/elementary#1419), so batches stay well below it and each statement small.
# (fakesnow runs such an executemany row by row: its speed says nothing about Snowflake's.)
INSERT_BATCH = 1000
PARQUET_CONTENT_TYPE = "application/vnd.apache.parquet"
T = TypeVar("T")


def _quiet(_line: str) -> None:
    """Where a check's S3 retries are logged: nowhere (the check's answer says what happened)."""


def snowflake_failure(what: str, exc: Exception) -> SyncFailure:
    text = f"{what}: {truncate(str(getattr(exc, 'msg', None) or exc), MAX_PROVIDER_TEXT)}"
    if isinstance(exc, sf_errors.Error) and getattr(exc, "sqlstate", None) == "28000":
        return SyncFailure("auth", text)
    if isinstance(exc, sf_errors.ForbiddenError):
        return SyncFailure("config", text, status=403)
    if isinstance(exc, sf_errors.ProgrammingError):
        return SyncFailure("config", text)
    return SyncFailure("provider_error", text)


class WarehouseExportClient(s3.S3ProviderClient):
    """The customer's bucket (boto3) and, optionally, their Snowflake account."""

    PROVIDER: ClassVar[str] = "warehouse"
    SECRET_FIELDS: ClassVar[frozenset[str]] = frozenset({"access_key_id", "secret_access_key", "snowflake_password"})

    snowflake_account: str | None = None
    snowflake_user: str | None = None
    snowflake_password: str | None = None
    snowflake_database: str | None = None
    snowflake_schema: str | None = None
    snowflake_warehouse: str | None = None
    snowflake_role: str | None = None
    snowflake_url: str | None = None

    @property
    def has_snowflake(self) -> bool:
        return bool(self.snowflake_account)

    def destination(self) -> str:
        snowflake = (self.snowflake_account, self.snowflake_database, self.snowflake_schema)
        return destination_id(self.base_url, self.bucket, self.prefix, snowflake if self.has_snowflake else ())

    def _s3_call(self, what: str, fn: Callable[[], T], log: Log = _quiet) -> T:
        return self.call(what, fn, log)

    def list_one(self) -> int:
        """ListObjectsV2 with MaxKeys=1 under the prefix: the credentials and the bucket in one call."""
        answer = self._s3_call(
            f"listing s3://{self.bucket}/{self.prefix}",
            lambda: self.s3().list_objects_v2(Bucket=self.bucket, Prefix=self.prefix.strip("/"), MaxKeys=1),
        )
        return int(answer.get("KeyCount", 0))

    def put(self, key: str, body: bytes, log: Log = _quiet) -> None:
        self._s3_call(
            f"writing s3://{self.bucket}/{key}",
            lambda: self.s3().put_object(Bucket=self.bucket, Key=key, Body=body, ContentType=PARQUET_CONTENT_TYPE),
            log,
        )

    def delete(self, key: str, log: Log = _quiet) -> None:
        self._s3_call(
            f"deleting s3://{self.bucket}/{key}", lambda: self.s3().delete_object(Bucket=self.bucket, Key=key), log
        )

    @contextmanager
    def snowflake(self) -> Iterator[SnowflakeLoader]:
        what = f"connecting to Snowflake account {self.snowflake_account}"
        params: dict[str, Any] = {
            "account": self.snowflake_account,
            "user": self.snowflake_user,
            "password": self.snowflake_password,
            "database": self.snowflake_database,
            "schema": self.snowflake_schema,
            "warehouse": self.snowflake_warehouse,
            "role": self.snowflake_role,
        }
        if self.snowflake_url:
            address = urlsplit(self.snowflake_url)
            params.update(host=address.hostname, protocol=address.scheme)
            if address.port:
                params["port"] = address.port
        try:
            conn = snowflake.connector.connect(
                **{k: v for k, v in params.items() if v}, login_timeout=int(self.read_timeout_s)
            )
        except sf_errors.Error as exc:
            raise snowflake_failure(what, exc) from exc
        try:
            yield SnowflakeLoader(conn)
        finally:
            conn.close()


class SnowflakeLoader:
    """One Snowflake session of a sync: each partition's rows replace that workspace's rows of
    that day (or of the whole table) in one transaction, so a re-export never duplicates."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.created: set[str] = set()

    def version(self) -> str:
        with self._errors("asking Snowflake for its version"):
            row = self.conn.cursor().execute("SELECT CURRENT_VERSION()").fetchone()
        return str(row[0])

    def replace(self, partition: Partition, workspace_id: str, frame: pl.DataFrame) -> None:
        load = snowflake_load(partition.dataset, export.BY_NAME[partition.dataset].schema, workspace_id, partition.day)
        table = partition.dataset + (f" {partition.day}" if partition.day else "")
        cursor = self.conn.cursor()
        if partition.dataset not in self.created:
            with self._errors(f"creating the Snowflake table {partition.dataset}"):
                cursor.execute(load.create)
            self.created.add(partition.dataset)
        rows = insert_rows(frame.select(load.columns), partition.day)
        with self._errors(f"loading {table} into Snowflake"):
            cursor.execute("BEGIN")
            try:
                cursor.execute(load.delete, load.delete_params)
                for start in range(0, len(rows), INSERT_BATCH):
                    cursor.executemany(load.insert, rows[start : start + INSERT_BATCH])
                cursor.execute("COMMIT")
            except BaseException:
                self.conn.rollback()
                raise

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except sf_errors.Error as exc:
            raise snowflake_failure(what, exc) from exc


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
            _export(api, target, changed, log, loader.replace)
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
        body = export.parquet_bytes(frame)
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
