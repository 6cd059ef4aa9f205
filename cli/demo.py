"""`flokit demo seed`: a reproducible demo history for a workspace, through the real data paths;
`flokit demo walkthrough`: its queue worked on the sandbox ad account."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click

from cli.context import NO_INSTANCE_KEY, App, json_option, pass_app
from cli.progress import Progress
from transforms.adaccounts.kinds import validate_config
from transforms.demo import DEFAULT_WORLD, NO_SIGNAL_WORLD, DemoConfig
from transforms.demo_truth import truth
from warehouse.adaccounts import repository as adaccounts
from warehouse.db import Database
from warehouse.errors import NotFound
from warehouse.instance_key import ensure_instance_key
from warehouse.lake import Lake
from warehouse.reports import demo as demo_data
from warehouse.reports.demo import SeedProgress
from warehouse.settings import Settings, instance_key_for
from warehouse.workspaces import get_workspace

# What `flokit up` seeds into a fresh demo workspace: enough for every report to show real
# numbers and the planted story beyond the noise (at 2000 users the best offer's country led
# the others' trial conversion in 7 seeds of 8, at 3000 in 8 of 8), and for the engine's checks
# to pass on the planted shift and pause (at 3000 both stay `draft` for want of sample, at 8000
# both are `ready`, so the walkthrough can run them; the offer test stays `draft`, which the
# walkthrough may still reject); seeding takes about 4 s and the first refresh 15-30 s on 2 cores.
UP_USERS = 8000
UP_DAYS = 60
UP_SEED = 1
SANDBOX_NAME = "Demo sandbox"
DEMO_ACTOR = "flokit demo"


def instance_key(settings: Settings) -> str | None:
    """The instance key, created as `flokit db upgrade` would when none exists yet."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)  # a PostgreSQL deployment may not have made it yet
    ensure_instance_key(settings)
    return settings.instance_key or instance_key_for(os.environ, settings.data_dir)


def connect_sandbox(database: Database, workspace_id: str, key: str) -> str:
    """The workspace's live sandbox ad account, connected when it has none: its campaigns and
    budgets come from the workspace's own delivered spend at the next registry sync (`flokit
    refresh`), so the engine can size budget shifts and the executor has something to change.
    It is labelled `sandbox` wherever it is listed; nothing outside FloKit's records is touched."""
    with database.write() as conn:
        for account in adaccounts.live_accounts(conn, workspace_id=workspace_id):
            if account.platform == "sandbox":
                return account.id
        account = adaccounts.connect(
            conn,
            workspace_id=workspace_id,
            platform="sandbox",
            config=validate_config("sandbox", {}),
            instance_key=key,
            actor=DEMO_ACTOR,
            name=SANDBOX_NAME,
        )
    return account.id


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
    sandbox_key: str | None = None,
) -> dict:
    """Seed `days` of history ending yesterday (UTC), in the workspace's reporting currency.

    With `truth_out`, also write what the reports should show (`transforms.demo_truth.truth`):
    the world's parameters, the true figures, the sample's realized totals and the story. With
    `sandbox_key` (the instance key), also connect a sandbox ad account (`connect_sandbox`)."""
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
        truth_out.write_text(
            json.dumps(truth(config, result.data, no_signal=no_signal, as_of=datetime.now(UTC)), indent=1) + "\n"
        )
    sandbox = None
    if sandbox_key:
        sandbox = connect_sandbox(database, workspace_id, sandbox_key)
        # Synced now, from the spend just landed: `flokit up`'s daemon has no registry schedule,
        # and its first engine run (after the first reports) sizes budget shifts on it.
        from orchestration.adaccounts.sync import sync_accounts  # deferred: loads the platform SDKs

        sync_accounts(database, lake, sandbox_key, ad_account_id=sandbox)
    return {
        "workspace_id": workspace_id,
        "sandbox_ad_account_id": sandbox,
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
    writes what the reports should show, so they can be checked against it. A labelled `sandbox`
    ad account is connected (once), so that the growth-actions engine can size budget shifts on
    the demo's campaigns after `flokit refresh`.
    """
    key = instance_key(app.settings)
    if key is None:
        app.fail(NO_INSTANCE_KEY)
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
            sandbox_key=key,
        )
    except NotFound:
        app.fail(f"no workspace {workspace_id}")
    app.emit(
        result,
        f"seeded {workspace_id}: {result['written']} events landed ({result['duplicate']} already there), "
        f"{result['spend_rows']} spend rows, {result['first_day']}..{result['last_day']}; "
        f"sandbox ad account {result['sandbox_ad_account_id']}",
    )


@demo.command("walkthrough")
@click.option("--workspace", "workspace_id", required=True, help="Workspace id (ws_...).")
@json_option
@pass_app
def walkthrough(app: App, workspace_id: str) -> None:
    """Work the demo queue on the sandbox ad account: run a ready budget shift, run and roll back
    a ready creative pause, reject an open offer test (orchestration/actions/walkthrough.py).

    Run `flokit refresh` first: the queue is the engine's. Refused when the workspace has a live
    ad account other than a sandbox, so it never writes to a real platform. `flokit up` runs it
    once, when it creates the demo workspace.
    """
    key = instance_key(app.settings)
    if key is None:
        app.fail(NO_INSTANCE_KEY)
    from orchestration.actions.walkthrough import WalkthroughRefused, walk  # deferred: loads the platform SDKs

    try:
        with app.database.read() as conn:
            get_workspace(conn, workspace_id)
        steps = walk(app.database, app.settings.paths.lake(), key, workspace_id)
    except NotFound:
        app.fail(f"no workspace {workspace_id}")
    except WalkthroughRefused as exc:
        app.fail(str(exc))
    app.emit(
        {"workspace_id": workspace_id, "steps": [asdict(s) for s in steps]},
        "\n".join(
            f"{s.action_type}: {s.action_id} {s.status}, {s.detail}" if s.action_id else f"{s.action_type}: {s.detail}"
            for s in steps
        ),
    )
