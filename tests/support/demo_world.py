"""The populated demo world: `flokit demo seed` at `flokit up`'s size and seed, `flokit refresh` and
`flokit demo walkthrough`, run as commands on SQLite, as `flokit up`'s demo queue makes it (a running
budget shift, a rolled-back creative pause and a rejected offer test on the sandbox ad account).

It is the slowest thing several tests start from (the dashboard's browser flows, the walkthrough's
own e2e test), so it is built once per run (`build_world`, the `demo_world_root` fixture in
tests/conftest.py, through `tests.support.built_once`) and copied by file into each test that wants
it (`copy_world`): what one test writes there, no other test reads.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cli.demo import UP_DAYS, UP_SEED, UP_USERS
from tests.browser.support import flokit_env
from tests.support.cli import flokit_in_process
from warehouse.bootstrap import bootstrap
from warehouse.db import Database, close_database, database_for
from warehouse.settings import Settings


def flokit(env: dict[str, str], *args: str) -> Any:
    """`flokit <args> --json` in `env`; its JSON answer."""
    done = flokit_in_process(env, *args, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def registry(env: dict[str, str], workspace_id: str) -> dict[str, dict[str, Any]]:
    """The sandbox ad account's registry as `flokit admin ad-accounts list --entities` shows it:
    {entity name: entity}."""
    listed = flokit(env, "admin", "ad-accounts", "list", "--workspace", workspace_id, "--entities")
    [account] = listed["ad_accounts"]
    assert account["sandbox"] is True
    return {e["name"]: e for e in account["registry"]}


@dataclass(frozen=True)
class Walked:
    """What `populate` saw: the sandbox's registry before the walkthrough, and the walkthrough's
    steps as it printed them."""

    registry_before: dict[str, dict[str, Any]]
    steps: list[dict[str, Any]]

    @property
    def action_ids(self) -> dict[str, str]:
        return {s["action_type"]: s["action_id"] for s in self.steps}


def populate(env: dict[str, str], workspace_id: str) -> Walked:
    """The demo as `flokit up` makes it (its size and seed), refreshed, and the walkthrough run, on
    the database and data directory of `env`."""
    flokit(env, "demo", "seed", "--workspace", workspace_id, "--users", str(UP_USERS), "--days", str(UP_DAYS),
           "--seed", str(UP_SEED))  # fmt: skip
    flokit(env, "refresh")
    before = registry(env, workspace_id)
    return Walked(before, flokit(env, "demo", "walkthrough", "--workspace", workspace_id)["steps"])


WORLD_FILE = "world.json"
EXPECTED = {"budget_shift": "running", "creative_pause": "rolled_back", "offer_test": "rejected"}


def build_world(root: Path, template_db: Path) -> None:
    """The populated demo world, made once in `root`: `root/data` (the SQLite database, the lake,
    the DuckDB files, the instance key) and `root/world.json` (bootstrap's answer and what
    `populate` saw). Tests never serve it: each gets a copy (`copy_world`)."""
    data_dir = root / "data"
    data_dir.mkdir(parents=True)
    target = data_dir / "flokit.db"
    shutil.copyfile(template_db, target)
    url = f"sqlite:///{target}"
    settings = Settings(data_dir=data_dir, database_url=url)
    try:
        with database_for(url).write() as conn:
            workspace = bootstrap(conn, name="Acme Fitness")
        walked = populate(flokit_env(settings), workspace["workspace_id"])
        assert {s["action_type"]: s["status"] for s in walked.steps} == EXPECTED, walked.steps
        with database_for(url).engine.connect() as conn:  # the whole database in the one file
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        close_database(url)
    made = {"workspace": workspace, "registry_before": walked.registry_before, "steps": walked.steps}
    (root / WORLD_FILE).write_text(json.dumps(made))


@dataclass(frozen=True)
class World:
    """A test's own copy of the populated demo world (what it writes there, no other test reads)."""

    settings: Settings
    db: Database
    workspace: dict[str, Any]
    seen: Walked

    @property
    def walked(self) -> dict[str, str]:
        """{action type: action id} of the walkthrough's running shift, rolled-back pause, rejected test."""
        return self.seen.action_ids


def copy_world(root: Path, into: Path) -> World:
    """Copy the world `build_world` made in `root` to `into/data` and open it there."""
    data_dir = into / "data"
    shutil.copytree(root / "data", data_dir)
    url = f"sqlite:///{data_dir / 'flokit.db'}"
    made = json.loads((root / WORLD_FILE).read_text())
    settings = Settings(data_dir=data_dir, database_url=url)
    return World(settings, database_for(url), made["workspace"], Walked(made["registry_before"], made["steps"]))
