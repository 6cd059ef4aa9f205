"""Read the Payback and Cohorts answers from the published report store, for every surface.

v1 (`api/v1/reports.py`) and the dashboard's report pages (`api/dashboard/reports.py`) both
answer through these two functions, from one snapshot of the store (a DuckDB cursor of the
worker's `serving.ReportReader`), so they can never disagree.
"""

from __future__ import annotations

from typing import Any

import duckdb

from transforms.reports.answers import (
    CohortsQuery,
    CohortsReport,
    PaybackMeta,
    PaybackQuery,
    PaybackReport,
    PaybackRow,
)
from transforms.timefmt import iso_z
from warehouse.db import Database
from warehouse.reports import serving
from warehouse.workspaces import get_workspace


def payback_answer(
    cur: duckdb.DuckDBPyConnection | None, db: Database, workspace_id: str, query: PaybackQuery
) -> PaybackReport:
    """The payback report for a workspace, from one snapshot of the store (`cur`; None before the
    first refresh: no rows): what v1 answers, and what the dashboard's Payback page and its CSV
    show (one computation for both). The workspace's reporting currency is read from `db`."""
    rows: list[dict[str, Any]] = []
    if cur is not None:
        rows = serving.payback_rows(
            cur,
            workspace_id=workspace_id,
            start=query.start_date,
            end=query.end_date,
            dimension=query.group_by,
            window=query.cohort_window_days,
        )
    with db.read() as conn:
        currency = get_workspace(conn, workspace_id).reporting_currency
    return PaybackReport(
        data=[PaybackRow.model_validate(row) for row in rows],
        meta=PaybackMeta(
            currency=currency,
            generated_at=iso_z(serving.meta(cur).generated_at),
            cohort_window_days=query.cohort_window_days,
        ),
    )


def cohorts_answer(
    cur: duckdb.DuckDBPyConnection | None, workspace_id: str, query: CohortsQuery
) -> tuple[CohortsReport, str | None]:
    """The cohort curves for a workspace and, from the same snapshot of the store, when it was
    generated (v1 answers only the curves; the dashboard's Cohorts page also says "data as of")."""
    curves: list[dict[str, Any]] = []
    if cur is not None:
        curves = serving.cohort_curves(
            cur, workspace_id=workspace_id, start=query.cohort_start, end=query.cohort_end, dimension=query.group_by
        )
    return CohortsReport.model_validate({"cohorts": curves}), iso_z(serving.meta(cur).generated_at)
