"""The warehouse export's pure decisions: what to look at again, where it goes, how it loads."""

from __future__ import annotations

from datetime import date

import polars as pl
import pytest

from transforms.integrations.warehouse_export import (
    NO_ROWS,
    STATE_KEY,
    Partition,
    destination_id,
    follow_destination,
    insert_rows,
    object_key,
    previous_digest,
    record,
    snowflake_load,
    snowflake_type,
    to_look_at,
)

DAY = date(2026, 6, 3)


def test_object_keys_follow_the_lake_layout_under_the_prefix() -> None:
    assert (
        object_key("flokit/prod/", "canonical_events", DAY)
        == "flokit/prod/canonical_events/date=2026-06-03/part.parquet"
    )
    assert object_key("/exports", "ltv", None) == "exports/ltv/data.parquet"
    assert object_key("", "spend", DAY) == "spend/date=2026-06-03/part.parquet"


def test_only_new_or_rewritten_files_are_looked_at_again() -> None:
    old = Partition("payback_daily", DAY, mtime_ns=100, size=10)
    state: dict[str, object] = {}
    assert to_look_at([old], state) == [old]
    record(state, old, "abc")
    assert previous_digest(state, old) == "abc"
    assert to_look_at([old], state) == []
    touched = Partition("payback_daily", DAY, mtime_ns=0, size=10)  # a refresh marking the day stale
    grown = Partition("payback_daily", DAY, mtime_ns=100, size=11)
    table = Partition("ltv", None, mtime_ns=100, size=10)
    assert to_look_at([touched, grown, table], state) == [touched, grown, table]
    record(state, table, NO_ROWS)
    assert state[STATE_KEY] == {"payback_daily": {"2026-06-03": [100, 10, "abc"]}, "ltv": {"table": [100, 10, ""]}}


def test_a_new_destination_forgets_what_was_exported() -> None:
    here = destination_id("http://s3", "b", "p/")
    state: dict[str, object] = {}
    assert not follow_destination(state, here)
    record(state, Partition("ltv", None, 1, 1), "x")
    assert not follow_destination(state, here)
    assert STATE_KEY in state
    with_snowflake = destination_id("http://s3", "b", "p", ("acme", "DB", "S"))
    assert with_snowflake != here
    assert follow_destination(state, with_snowflake)
    assert STATE_KEY not in state


def test_snowflake_types_of_the_lake_columns() -> None:
    assert snowflake_type(pl.String()) == "VARCHAR"
    assert snowflake_type(pl.Date()) == "DATE"
    assert snowflake_type(pl.Datetime("us", "UTC")) == "TIMESTAMP_TZ"
    assert snowflake_type(pl.Int32()) == "NUMBER(38,0)"
    assert snowflake_type(pl.Float64()) == "FLOAT"
    with pytest.raises(ValueError, match="no Snowflake type"):
        snowflake_type(pl.List(pl.String()))


def test_a_daily_load_replaces_the_workspaces_day_and_a_table_load_its_whole_table() -> None:
    schema = {"workspace_id": pl.String(), "value": pl.String(), "day": pl.Int32()}
    daily = snowflake_load("payback_daily", schema, "ws_1", DAY)
    assert daily.create == (
        'CREATE TABLE IF NOT EXISTS "PAYBACK_DAILY" '
        '("WORKSPACE_ID" VARCHAR, "VALUE" VARCHAR, "DAY" NUMBER(38,0), "PARTITION_DATE" DATE)'
    )
    assert daily.delete == 'DELETE FROM "PAYBACK_DAILY" WHERE "WORKSPACE_ID" = %s AND "PARTITION_DATE" = %s'
    assert daily.delete_params == ("ws_1", DAY)
    assert (
        daily.insert
        == 'INSERT INTO "PAYBACK_DAILY" ("WORKSPACE_ID", "VALUE", "DAY", "PARTITION_DATE") VALUES (%s, %s, %s, %s)'
    )
    table = snowflake_load("ltv", schema, "ws_1", None)
    assert table.delete == 'DELETE FROM "LTV" WHERE "WORKSPACE_ID" = %s' and table.delete_params == ("ws_1",)
    frame = pl.DataFrame({"workspace_id": ["ws_1"], "value": ["x"], "day": [3]}, schema=schema)
    assert insert_rows(frame, DAY) == [("ws_1", "x", 3, DAY)]
    assert insert_rows(frame, None) == [("ws_1", "x", 3)]
    with pytest.raises(ValueError, match="not a plain identifier"):
        snowflake_load('x"; DROP TABLE y', schema, "ws_1", None)
