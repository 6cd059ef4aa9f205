"""What the dashboard's browser flows start from: a real FloKit under gunicorn with an instance key,
an operator signed in through a one-time link, and actions that are real.

Real actions come two ways, both as an operator would meet them: the engine's, from `flokit demo
seed` + `flokit refresh` + `flokit demo walkthrough` run as commands (a running budget shift, a
rolled-back creative pause and a rejected offer test on the sandbox ad account), built once per run
(`build_world`, the `demo_world_root` fixture) and copied by file into each test that wants it
(`copy_world`, the `demo_world` fixture: far cheaper than building it again), or a client's,
created with `POST /v1/actions` (status ready). What the dashboard did is read back over v1
(`GET /v1/actions/<id>`), the API a client reads it with.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from cli.demo import UP_DAYS, UP_SEED, UP_USERS
from tests.browser.support import TWO_FRAMES, assert_accessible, flokit_env, press_sign_in, tables_scrolling_sideways
from tests.cli_support import flokit_in_process
from tests.support import GunicornServer
from warehouse.bootstrap import bootstrap
from warehouse.dashboard import sessions
from warehouse.db import Database, close_database, database_for
from warehouse.settings import Settings

OPERATOR = "maya@example.com"
ACTIONS_PATH = "/dashboard/actions"
PHONE = 390


def flokit(settings: Settings, *args: str) -> Any:
    """`flokit <args> --json` on the test's database; its JSON answer."""
    done = flokit_in_process(flokit_env(settings), *args, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def populate(settings: Settings, workspace_id: str) -> dict[str, str]:
    """The demo as `flokit up` makes it (its size and seed), refreshed, and the walkthrough run:
    {action type: action id} of the walkthrough's running shift, rolled-back pause, rejected test."""
    flokit(settings, "demo", "seed", "--workspace", workspace_id, "--users", str(UP_USERS), "--days", str(UP_DAYS),
           "--seed", str(UP_SEED))  # fmt: skip
    flokit(settings, "refresh")
    steps = flokit(settings, "demo", "walkthrough", "--workspace", workspace_id)["steps"]
    expected = {"budget_shift": "running", "creative_pause": "rolled_back", "offer_test": "rejected"}
    assert {s["action_type"]: s["status"] for s in steps} == expected, steps
    return {s["action_type"]: s["action_id"] for s in steps}


WORLD_FILE = "world.json"


def build_world(root: Path, template_db: Path) -> None:
    """The populated demo world, made once in `root`: `root/data` (the SQLite database, the lake,
    the DuckDB files, the instance key) and `root/world.json` ({"workspace": bootstrap's answer,
    "walked": populate's answer}). Tests never serve it: each gets a copy (`copy_world`)."""
    data_dir = root / "data"
    data_dir.mkdir(parents=True)
    target = data_dir / "flokit.db"
    shutil.copyfile(template_db, target)
    url = f"sqlite:///{target}"
    settings = Settings(data_dir=data_dir, database_url=url)
    try:
        with database_for(url).write() as conn:
            workspace = bootstrap(conn, name="Acme Fitness")
        walked = populate(settings, workspace["workspace_id"])
        with database_for(url).engine.connect() as conn:  # the whole database in the one file
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        close_database(url)
    (root / WORLD_FILE).write_text(json.dumps({"workspace": workspace, "walked": walked}))


@dataclass(frozen=True)
class World:
    """A test's own copy of the populated demo world (what it writes there, no other test reads)."""

    settings: Settings
    db: Database
    workspace: dict[str, Any]
    walked: dict[str, str]


def copy_world(root: Path, into: Path) -> World:
    """Copy the world `build_world` made in `root` to `into/data` and open it there."""
    data_dir = into / "data"
    shutil.copytree(root / "data", data_dir)
    url = f"sqlite:///{data_dir / 'flokit.db'}"
    made = json.loads((root / WORLD_FILE).read_text())
    return World(Settings(data_dir=data_dir, database_url=url), database_for(url), made["workspace"], made["walked"])


def login_link(server: GunicornServer, db: Database, workspace_id: str, operator: str = OPERATOR) -> str:
    """A one-time sign-in link, as `flokit admin login-link` mints it."""
    with db.write() as conn:
        token = sessions.create_login_token(conn, operator=operator, workspace_id=workspace_id)
    return f"{server.base}/dashboard/login?token={token}"


def sign_in(page: Any, server: GunicornServer, db: Database, workspace_id: str, operator: str = OPERATOR) -> str:
    """Open a fresh link in `page` and press Sign in; it lands on the Actions page. Returns the link
    (used now)."""
    link = login_link(server, db, workspace_id, operator)
    press_sign_in(page, link)
    assert page.url == f"{server.base}{ACTIONS_PATH}", page.url
    settle(page)
    return link


def settle(page: Any) -> None:
    """Wait until the page has loaded everything, its icon too: chromium fetches the icon after
    the load event, and leaving the page before it arrives aborts it, which the guard counts as a
    failed request (seen on the sign-out click right after signing in)."""
    page.wait_for_load_state("networkidle")


def v1(server: GunicornServer, key: str, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    """A v1 request with a bearer key: (status, JSON body)."""
    answer = requests.request(
        method, f"{server.base}{path}", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=30
    )
    return answer.status_code, dict(answer.json())


def create_ready(server: GunicornServer, workspace: dict, action_type: str = "budget_shift", reason: str = "") -> str:
    """A client's own proposal over `POST /v1/actions`: listed as ready. Its id."""
    status, body = v1(
        server,
        workspace["api_key_read_write"],
        "POST",
        "/v1/actions",
        {"workspace_id": workspace["workspace_id"], "type": action_type, "reason": reason or f"A {action_type} to try"},
    )
    assert status == 201 and body["status"] == "ready_for_approval", body
    return str(body["id"])


def v1_action(server: GunicornServer, workspace: dict, action_id: str) -> dict:
    status, body = v1(server, workspace["api_key_read_only"], "GET", f"/v1/actions/{action_id}")
    assert status == 200, body
    return dict(body["action"])


def transitions(action: dict) -> list[tuple[str | None, str, str, str | None]]:
    """(from, to, actor, note) of each status change in a v1 action's history, oldest first."""
    return [
        (h["from_status"], h["to_status"], h["actor"], h["note"])
        for h in action["history"]
        if h["entry"] == "transition"
    ]


def tables_wider_than_their_wrapper(page: Any) -> list[str]:
    """The captions of the tables that need a horizontal scroll at the current width."""
    return list(
        page.evaluate(
            """() => [...document.querySelectorAll('.table-wrap')]
                       .filter(w => w.scrollWidth > w.clientWidth)
                       .map(w => (w.querySelector('caption') || w).textContent.trim())"""
        )
    )


def check_at_phone_width(page: Any, path: str) -> None:
    """At 390 px: the document no wider than the viewport (a wide table scrolls inside its
    wrapper), and axe again (what scrolls, and so must be reachable by keyboard, differs)."""
    before = page.viewport_size
    page.set_viewport_size({"width": PHONE, "height": 800})
    try:
        page.evaluate(TWO_FRAMES)
        width = page.evaluate("() => document.documentElement.scrollWidth")
        assert width <= PHONE, f"{path} is {width} px wide at {PHONE} px (tables must scroll in their wrapper)"
        # A list or a detail table reads as one card per row on a phone, nothing hidden sideways.
        sideways = tables_scrolling_sideways(page)
        assert sideways == [], f"{path}: at {PHONE} px these tables need a sideways scroll: {sideways}"
        assert_accessible(page)
    finally:
        page.set_viewport_size(before)
