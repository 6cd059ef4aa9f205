"""`flokit demo walkthrough` as `flokit up` runs it on a fresh demo: after `flokit demo seed` (its
size) and `flokit refresh` (tests/support/demo_world.py), the engine's ready shift is running on
the sandbox (the registry shows the moved budgets), its ready pause was run and rolled back (the
ads are active again, through the executor's revert), its ready offer test is rejected, each by
the labelled demo operator with a note; what the daemon's executor sensor then asks for writes
nothing twice; a second walkthrough finds nothing ready; and a workspace with a real ad account
is refused before anything is written.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from orchestration.actions.executor import execute
from orchestration.actions.walkthrough import DEMO_OPERATOR
from tests.browser.support import flokit_env
from tests.providers.meta_graph_fake import ACCOUNT, TOKEN, MetaGraphFake
from tests.support.cli import flokit_in_process
from tests.support.databases import fresh_database_url
from tests.support.demo_world import EXPECTED, Walked, copy_world, populate, registry
from warehouse.actions import executions, repository
from warehouse.actions.executions import work_after
from warehouse.db import close_database, database_for
from warehouse.lake import LocalLake
from warehouse.settings import instance_key_for

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.both_backends(
        reason="the production shape end to end once: gunicorn, Dagster runs and every surface on PostgreSQL"
    ),
]


def _env(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    urls = fresh_database_url(request, backend, tmp_path)
    env = {**os.environ, "FLOKIT_DATA_DIR": str(tmp_path / "data"), "FLOKIT_DATABASE_URL": next(urls)}
    for name in ("DAGSTER_HOME", "FLOKIT_SECRET_KEY"):
        env.pop(name, None)
    yield env
    with pytest.raises(StopIteration):
        next(urls)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    yield from _env(request, request.param, tmp_path)


@dataclass(frozen=True)
class Demo:
    env: dict[str, str]
    workspace_id: str
    walked: Walked


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def demo(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Demo]:
    """A fresh demo at `flokit up`'s size, refreshed, and the walkthrough run once. On SQLite, a
    copy of the run's populated demo world, which these same commands built once for this test and
    the browser's (tests/support/demo_world.py); on PostgreSQL, built here."""
    if request.param == "sqlite":
        world = copy_world(request.getfixturevalue("demo_world_root"), tmp_path)
        try:
            yield Demo(flokit_env(world.settings), world.workspace["workspace_id"], world.seen)
        finally:
            close_database(world.settings.database_url)
        return
    for env in _env(request, request.param, tmp_path):
        flokit(env, "db", "upgrade")
        workspace_id = flokit(env, "admin", "bootstrap", "--name", "Demo")["workspace_id"]
        yield Demo(env, workspace_id, populate(env, workspace_id))


def flokit(env: dict[str, str], *args: str, ok: bool = True) -> Any:
    done = flokit_in_process(env, *args, "--json")
    assert (done.returncode == 0) == ok, done.stdout + done.stderr
    return json.loads(done.stdout) if ok else done.stderr


def test_the_walkthrough_runs_rolls_back_and_rejects_on_the_sandbox_once(demo: Demo) -> None:
    env, workspace_id, before = demo.env, demo.workspace_id, demo.walked.registry_before
    steps = {s["action_type"]: s for s in demo.walked.steps}
    assert {t: s["status"] for t, s in steps.items()} == EXPECTED
    database = database_for(env["FLOKIT_DATABASE_URL"])
    with database.read() as conn:
        shift, pause, offer = (
            repository.get_action(conn, workspace_id=workspace_id, action_id=steps[t]["action_id"])
            for t in ("budget_shift", "creative_pause", "offer_test")
        )
        trail = {
            a.id: repository.transitions(conn, workspace_id=workspace_id, action_id=a.id) for a in (shift, pause, offer)
        }
        ledger = {a.id: executions.executions(conn, action_id=a.id) for a in (shift, pause)}
    # Every human step is the labelled demo operator's, with a note saying so.
    assert shift.approved_by == pause.approved_by == DEMO_OPERATOR
    assert [(t.trigger, t.actor) for t in trail[pause.id][-3:]] == [
        ("approve", DEMO_OPERATOR), ("start", "flokit executor"), ("rollback", DEMO_OPERATOR)
    ]  # fmt: skip
    assert all("demo walkthrough" in (t.note or "") for t in trail[pause.id] if t.actor == DEMO_OPERATOR)
    [(trigger, reason)] = [(t.trigger, t.note) for t in trail[offer.id] if t.actor == DEMO_OPERATOR]
    assert offer.rejected_by == DEMO_OPERATOR and trigger == "reject" and "demo walkthrough" in (reason or "")

    # The sandbox's records: the shift's budgets moved by its amount, the pause undone.
    after = registry(env, workspace_id)
    source, target = shift.parameters["from_campaign"], shift.parameters["to_campaign"]
    cents = round(shift.parameters["amount_per_day"] * 100)
    assert after[source]["daily_budget"] == before[source]["daily_budget"] - cents
    assert after[target]["daily_budget"] == before[target]["daily_budget"] + cents
    paused = [n for n, e in before.items() if e["report_creative"] == pause.parameters["creative"]]
    assert paused and all(after[n]["status"] == "active" for n in paused)
    assert {w.kind for w in ledger[pause.id]} == {"apply", "revert"}
    assert all(w.state == "verified" for w in ledger[shift.id] + ledger[pause.id])

    # What the daemon's executor sensor then requests (it has not seen these transitions) is
    # executed as its job would: nothing is written twice, no conflict is recorded.
    key = instance_key_for(env, Path(env["FLOKIT_DATA_DIR"]))
    lake = LocalLake(Path(env["FLOKIT_DATA_DIR"]) / "lake")
    with database.read() as conn:
        work = work_after(conn, after_transition_id=0)
    assert {(a, k) for a, k, _ in work} == {(pause.id, "revert")}
    for action_id, kind, _ in work:
        outcome = execute(database, lake, key, action_id=action_id, kind=kind, now=datetime.now(UTC))
        assert outcome.writes == 0 and outcome.conflicts == [], outcome
    with database.read() as conn:
        assert {a: executions.executions(conn, action_id=a) for a in ledger} == ledger
    assert registry(env, workspace_id) == after

    again = flokit(env, "demo", "walkthrough", "--workspace", workspace_id)["steps"]
    assert [s["status"] for s in again] == [None, None, None]
    database.dispose()


def test_a_workspace_with_a_real_ad_account_is_refused(env: dict[str, str], tmp_path: Path) -> None:
    flokit(env, "db", "upgrade")
    workspace_id = flokit(env, "admin", "bootstrap", "--name", "Acme")["workspace_id"]
    with MetaGraphFake() as meta:
        config = tmp_path / "meta.json"
        config.write_text(json.dumps({"access_token": TOKEN, "ad_account_id": ACCOUNT, "base_url": meta.url}))
        flokit(env, "admin", "ad-accounts", "connect", "--workspace", workspace_id, "--platform", "meta",
               "--config", str(config))  # fmt: skip
        refused = flokit(env, "demo", "walkthrough", "--workspace", workspace_id, ok=False)
        assert "runs only on sandbox ad accounts" in refused and "(meta)" in refused
        assert meta.writes == []
    assert "no workspace ws_nope" in flokit(env, "demo", "walkthrough", "--workspace", "ws_nope", ok=False)
