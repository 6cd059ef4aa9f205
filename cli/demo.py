"""`flokit demo seed`: a reproducible demo history for a workspace, through the real data paths."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import click

from cli.context import load_settings, open_database
from cli.output import emit, fail
from transforms.demo import DemoConfig
from warehouse.db import Database
from warehouse.lake import Lake
from warehouse.reports import demo as demo_data
from warehouse.workspaces import NotFound, get_workspace

# What `flokit up` seeds into a fresh demo workspace: enough for every report to show real
# numbers, small enough that startup stays a few seconds.
UP_USERS = 2000
UP_DAYS = 60
UP_SEED = 1


def seed_workspace(database: Database, lake: Lake, workspace_id: str, users: int, days: int, seed: int) -> dict:
    """Seed `days` of history ending yesterday (UTC), in the workspace's reporting currency."""
    with database.read() as conn:
        workspace = get_workspace(conn, workspace_id)
    today = datetime.now(UTC).date()
    config = DemoConfig(
        workspace_id=workspace_id,
        users=users,
        days=days,
        seed=seed,
        start=today - timedelta(days=days),
        currency=workspace.reporting_currency,
    )
    result = demo_data.seed(database, lake, config)
    return {
        "workspace_id": workspace_id,
        "events": result.events,
        "written": result.written,
        "duplicate": result.duplicate,
        "spend_rows": result.spend_rows,
        "first_day": result.first_day.isoformat(),
        "last_day": result.last_day.isoformat(),
    }


@click.group()
def demo() -> None:
    """Demo data."""


@demo.command("seed")
@click.option("--workspace", "workspace_id", required=True, help="Workspace id (ws_...).")
@click.option("--users", type=click.IntRange(1, 5_000_000), default=UP_USERS, show_default=True)
@click.option("--days", type=click.IntRange(1, 730), default=UP_DAYS, show_default=True, help="Days of history.")
@click.option("--seed", type=int, default=UP_SEED, show_default=True, help="Same seed, same history.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def seed(workspace_id: str, users: int, days: int, seed: int, as_json: bool) -> None:
    """Land a generated history (installs, paywalls, trials, subscriptions, refunds) and daily spend.

    Events go through the landing path (dedup claims), so re-running with the same seed adds
    nothing; `flokit refresh` then makes every report answerable.
    """
    settings = load_settings()
    database = open_database(settings)
    try:
        result = seed_workspace(database, Lake(settings.lake_dir), workspace_id, users, days, seed)
    except NotFound:
        fail(f"no workspace {workspace_id}", as_json)
    emit(
        result,
        as_json,
        f"seeded {workspace_id}: {result['written']} events landed ({result['duplicate']} already there), "
        f"{result['spend_rows']} spend rows, {result['first_day']}..{result['last_day']}",
    )
