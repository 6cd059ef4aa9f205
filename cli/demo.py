"""`flokit demo seed`: a reproducible demo history for a workspace, through the real data paths."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click

from cli.context import App, json_option, pass_app
from cli.progress import Progress
from transforms.demo import DEFAULT_WORLD, NO_SIGNAL_WORLD, DemoConfig
from transforms.demo_truth import truth
from warehouse.db import Database
from warehouse.errors import NotFound
from warehouse.lake import Lake
from warehouse.reports import demo as demo_data
from warehouse.reports.demo import SeedProgress
from warehouse.workspaces import get_workspace

# What `flokit up` seeds into a fresh demo workspace: enough for every report to show real
# numbers and the planted story beyond the noise (at 2000 users the best offer's country led
# the others' trial conversion in 7 seeds of 8, at 3000 in 8 of 8), small enough that startup
# stays a few seconds.
UP_USERS = 3000
UP_DAYS = 60
UP_SEED = 1


def seed_workspace(
    database: Database,
    lake: Lake,
    workspace_id: str,
    users: int,
    days: int,
    seed: int,
    progress: SeedProgress | None = None,
    *,
    no_signal: bool = False,
    truth_out: Path | None = None,
) -> dict:
    """Seed `days` of history ending yesterday (UTC), in the workspace's reporting currency.

    With `truth_out`, also write what the reports should show (`transforms.demo_truth.truth`):
    the world's parameters, the true figures, the sample's realized totals and the story."""
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
    world = NO_SIGNAL_WORLD if no_signal else DEFAULT_WORLD
    result = demo_data.seed(database, lake, config, progress or (lambda _step, _done, _total: None), world)
    if truth_out is not None:
        truth_out.write_text(json.dumps(truth(config, result.data, no_signal=no_signal), indent=1) + "\n")
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
@click.option(
    "--truth-out",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="Write the planted truth as JSON: parameters, true figures, realized totals, story.",
)
@click.option(
    "--no-signal",
    is_flag=True,
    help="The A/A world: every campaign, creative and offer drawn from the same parameters (story: null).",
)
@json_option
@pass_app
def seed(
    app: App, workspace_id: str, users: int, days: int, seed: int, truth_out: Path | None, no_signal: bool
) -> None:
    """Land a generated history (installs, paywalls, trials, subscriptions, refunds) and daily spend.

    Events go through the landing path (dedup claims), so re-running with the same seed adds
    nothing; `flokit refresh` then makes every report answerable. The history is drawn from
    known parameters (`transforms.demo.DEFAULT_WORLD`, which plants a story); `--truth-out`
    writes what the reports should show, so they can be checked against it.
    """
    steps = Progress(app)

    def progress(step: str, done: int, total: int) -> None:
        if step == "generated":
            steps.done(f"generated {done} events for {users} users over {days} days")
        elif step == "landing":
            steps.advance("landing events", done, total)
            if done == total:
                steps.done(f"landed {total} events")
        elif step == "spend":
            steps.done(f"wrote {done} daily spend rows")

    try:
        result = seed_workspace(
            app.database,
            app.settings.paths.lake(),
            workspace_id,
            users,
            days,
            seed,
            progress,
            no_signal=no_signal,
            truth_out=truth_out,
        )
    except NotFound:
        app.fail(f"no workspace {workspace_id}")
    app.emit(
        result,
        f"seeded {workspace_id}: {result['written']} events landed ({result['duplicate']} already there), "
        f"{result['spend_rows']} spend rows, {result['first_day']}..{result['last_day']}",
    )
