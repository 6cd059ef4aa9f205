"""`warehouse` (the customer's S3 bucket, and Snowflake): the export's writer, boto3 and the Snowflake loader.

S3 is reached with boto3 (`endpoint_url` = the integration's `base_url`), with the retries and
the reading of S3's errors every S3 connector shares (`clients/s3.py`): refused credentials are
`auth` with S3's own message, a missing or misnamed bucket `config`, throttling `rate_limited`,
other 5xx and unreachable endpoints `provider_error`. Snowflake is `clients/snowflake.py`. What
is sent, and when, is the connector's (`orchestration.syncs.connectors.warehouse_export`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar, TypeVar
from urllib.parse import urlsplit

from clients import s3
from clients.snowflake import SnowflakeLoader, session
from transforms.integrations.warehouse_export import destination_id

PARQUET_CONTENT_TYPE = "application/vnd.apache.parquet"
T = TypeVar("T")
Log = Callable[[str], None]


def _quiet(_line: str) -> None:
    """Where a check's S3 retries are logged: nowhere (the check's answer says what happened)."""


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
        what = f"connecting to Snowflake account {self.snowflake_account}"
        with session(params, login_timeout=int(self.read_timeout_s), what=what) as loader:
            yield loader
