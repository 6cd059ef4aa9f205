"""`warehouse` (Snowflake): the warehouse export's optional table load, through `snowflake-connector-python`.

The connection is opened with `snowflake.connector.connect`, read as a module attribute at call
time so that fakesnow's patch reaches it in tests. Errors: a refused login is a `DatabaseError`
whose sqlstate is 28000 (the connector's CREDENTIAL_REJECTION_GS_CODES, e.g. 390100 "Incorrect
username or password was specified."): `AuthFailed`; a 403 on login (an unknown account) and SQL
refusals (a database, schema or privilege missing) are `ConfigRefused`; the rest is
`ProviderFailed`. Messages carry Snowflake's own text, cut short, never the password.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import polars as pl
import snowflake.connector
import snowflake.connector.errors as sf_errors

from transforms.client_errors import ClientError, error_for
from transforms.integrations.errors import MAX_PROVIDER_TEXT, truncate
from transforms.integrations.warehouse_export import Partition, insert_rows, snowflake_load

# Rows per INSERT: the connector rewrites an `executemany` INSERT with pyformat parameters into
# one multi-row INSERT (snowflake/connector/cursor.py, "rewriting INSERT query"), and Snowflake
# refuses a list of more than 16,384 expressions (error 001795, seen on a multi-row INSERT in
# elementary-data/elementary#1419), so batches stay well below it and each statement small.
# (fakesnow runs such an executemany row by row: its speed says nothing about Snowflake's.)
INSERT_BATCH = 1000


def failure(what: str, exc: Exception) -> ClientError:
    """A Snowflake error as the hierarchy's, by what it says about the login or the SQL."""
    text = f"{what}: {truncate(str(getattr(exc, 'msg', None) or exc), MAX_PROVIDER_TEXT)}"
    if isinstance(exc, sf_errors.Error) and getattr(exc, "sqlstate", None) == "28000":
        return error_for("auth", text)
    if isinstance(exc, sf_errors.ForbiddenError):
        return error_for("config", text, status=403)
    if isinstance(exc, sf_errors.ProgrammingError):
        return error_for("config", text)
    return error_for("provider_error", text)


@contextmanager
def session(params: Mapping[str, Any], *, login_timeout: int, what: str) -> Iterator[SnowflakeLoader]:
    """One Snowflake session (`params`: account, user, password, ...; empty ones left out),
    closed when the block ends."""
    try:
        conn = snowflake.connector.connect(**{k: v for k, v in params.items() if v}, login_timeout=login_timeout)
    except sf_errors.Error as exc:
        raise failure(what, exc) from exc
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

    def replace(
        self, partition: Partition, schema: Mapping[str, pl.DataType], workspace_id: str, frame: pl.DataFrame
    ) -> None:
        """The workspace's rows of `partition` in its table become `frame`'s (`schema`: the
        dataset's columns, which the table is created with when missing)."""
        load = snowflake_load(partition.dataset, schema, workspace_id, partition.day)
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
            raise failure(what, exc) from exc
