"""Operational tables read out as Polars frames for the lake."""

from __future__ import annotations

import polars as pl
from sqlalchemy.engine import Connection

from warehouse.tables import workspaces

WORKSPACES_DATASET = "workspaces"  # one whole-table file in the lake
WORKSPACE_SCHEMA = pl.Schema(
    {
        "workspace_id": pl.String(),
        "name": pl.String(),
        "reporting_currency": pl.String(),
        "timezone": pl.String(),
        "created_at": pl.Datetime("us", "UTC"),
    }
)


def workspaces_frame(conn: Connection) -> pl.DataFrame:
    rows = conn.execute(workspaces.select().order_by(workspaces.c.id)).all()
    return pl.DataFrame(
        [(r.id, r.name, r.reporting_currency, r.timezone, r.created_at) for r in rows],
        schema=WORKSPACE_SCHEMA,
        orient="row",
    )
