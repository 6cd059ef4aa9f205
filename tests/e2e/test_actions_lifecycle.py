"""A growth action's whole life through `flokit up` (real processes) and `flokit` commands, against
a fake Meta Marketing API on 127.0.0.1 driven by the facebook-business SDK:

1. `flokit demo seed` lands the planted world (google_uac pays back slowest, meta_broad fastest);
   the operator swaps the demo's sandbox ad account for a Meta account whose campaigns carry the
   report's labels (`flokit admin ad-accounts connect --platform meta`).
2. `flokit refresh` syncs the registry, publishes the reports and runs the engine: a budget shift
   from google_uac to meta_broad, sized from the account's budgets, is ready for approval.
3. Under `flokit up` (gunicorn, the Dagster daemon), the operator approves it over v1; the
   daemon's `execute_action_sensor` runs it: Meta receives the absolute budgets, decrease first,
   and the action is `running`.
4. Time is compressed: the change is moved nine days into the past (the only write to FloKit's
   state that no product path makes) and Meta's spend for meta_broad since then is restated at
   2.5x (the same way a spend sync delivers a restatement), so its cost per install climbs well
   past the rule's 1.3x.
5. `flokit refresh` again: the monitor finds the breach, emits `guardrail.triggered`, and under the
   default policy rolls the action back; the daemon's executor sensor reverts it (Meta receives the
   recorded previous budgets, decrease first) and its webhook sensor delivers the events, signed,
   to a receiver.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import requests
import sqlalchemy as sa

from tests.providers.meta_graph_fake import ACCOUNT, TOKEN, MetaGraphFake
from tests.support.cli import flokit_in_process
from tests.support.databases import fresh_database_url
from tests.support.up import Up, dagster_ready, flokit_up
from tests.support.webhook_receiver import Receiver, running_receiver
from transforms.demo import DEFAULT_WORLD
from transforms.webhooks.verify import verify
from warehouse.actions.tables import actions
from warehouse.db import database_for
from warehouse.lake import LocalLake
from warehouse.reports.report_lake import SPEND_RAW, scan_days, write_spend_raw

pytestmark = pytest.mark.e2e
USERS, DAYS, SEED = 5000, 45, 1  # seed 1 at 5000 users: the shift is ready (at 3000, a draft)
BUDGET_CENTS = 50_000  # every campaign: $500.00 a day (Meta's offset unit for USD is cents)
SOURCE, TARGET = "google_uac", "meta_broad"  # the planted story: slowest -> fastest
COMPRESSED = timedelta(days=9)
RESTATED = 2.5


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    urls = fresh_database_url(request, request.param, tmp_path)
    env = {**os.environ, "FLOKIT_DATA_DIR": str(tmp_path / "data"), "FLOKIT_DATABASE_URL": next(urls),
           "FLOKIT_WEBHOOKS_ALLOW_PRIVATE": "1"}  # fmt: skip
    for name in ("DAGSTER_HOME", "FLOKIT_SECRET_KEY"):
        env.pop(name, None)
    yield env
    with pytest.raises(StopIteration):
        next(urls)


@pytest.fixture
def meta() -> Iterator[MetaGraphFake]:
    """One Meta ad account running every demo campaign under the report's labels, each with a
    campaign budget (CBO) and one ad set whose ads are the campaign's creatives."""
    fake = MetaGraphFake(page_size=25)
    for campaign in DEFAULT_WORLD.campaigns:
        cid = fake.add("campaign", campaign.name, daily_budget=BUDGET_CENTS)
        ad_set = fake.add("ad_set", f"{campaign.name}_set", parent=cid)
        for i in range(len(campaign.creatives)):
            fake.add("ad", f"{campaign.name}_cr{i + 1}", parent=ad_set)
    with fake:
        yield fake


def flokit(env: dict[str, str], *args: str, as_json: bool = True) -> Any:
    done = flokit_in_process(env, *args, *(["--json"] if as_json else []))
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout) if as_json else done.stdout + done.stderr


def wait_until(what: str, check: Callable[[], Any], timeout: float, up: Up) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        assert up.process.poll() is None, up.output()
        time.sleep(1)
    raise AssertionError(f"timed out waiting for {what}\n{up.output()[-4000:]}")


def campaign_id(meta: MetaGraphFake, name: str) -> str:
    [found] = [i for i, n in meta.objects.items() if n["kind"] == "campaign" and n["name"] == name]
    return found


def restate_target_spend(env: dict[str, str], workspace_id: str, since: datetime) -> float:
    """Meta restates meta_broad's spend since the change at RESTATED times what it was: delivered
    as a spend sync delivers it (rows of the same key; the last one wins downstream). Returns the
    spend added."""
    lake = LocalLake(Path(env["FLOKIT_DATA_DIR"]) / "lake")
    yesterday = datetime.now(UTC).date() - timedelta(days=1)
    days = [since.date() + timedelta(days=k) for k in range((yesterday - since.date()).days + 1)]
    rows = (
        scan_days(lake, SPEND_RAW, days)
        .filter((pl.col("workspace_id") == workspace_id) & (pl.col("campaign") == TARGET))
        .collect()
    )
    assert rows.height, "no spend to restate"
    write_spend_raw(lake, rows.with_columns(pl.col("spend") * RESTATED))
    return float(rows.get_column("spend").sum()) * (RESTATED - 1)


def received(receiver: Receiver, secret: str, event_type: str) -> list[dict[str, Any]]:
    """The events of `event_type` the receiver got, each signature checked with the endpoint's secret."""
    bodies = []
    for r in receiver.at("/hooks"):
        verdict = verify(r.body, r.all("Service-Signature"), [secret], r.now_ms)
        assert verdict.ok, verdict.reason
        body = json.loads(r.body)
        if body["type"] == event_type:
            bodies.append(body)
    return bodies


def test_an_approved_shift_runs_on_meta_and_a_planted_deterioration_rolls_it_back(
    env: dict[str, str], meta: MetaGraphFake, tmp_path: Path
) -> None:
    flokit(env, "db", "upgrade")
    ws = flokit(env, "admin", "bootstrap", "--name", "Acme")
    workspace_id, key = ws["workspace_id"], ws["api_key_read_write"]
    seeded = flokit(env, "demo", "seed", "--workspace", workspace_id, "--users", str(USERS), "--days", str(DAYS),
                    "--seed", str(SEED))  # fmt: skip
    flokit(env, "admin", "ad-accounts", "remove", "--workspace", workspace_id, "--id", seeded["sandbox_ad_account_id"])
    config = tmp_path / "meta.json"
    config.write_text(json.dumps({"access_token": TOKEN, "ad_account_id": ACCOUNT, "base_url": meta.url}))
    flokit(env, "admin", "ad-accounts", "connect", "--workspace", workspace_id, "--platform", "meta",
           "--config", str(config))  # fmt: skip

    # 2. The engine proposes the planted shift, sized from Meta's budgets.
    printed = flokit(env, "refresh", as_json=False)
    # The shift, a creative pause and an offer test on each of two paywalls (onboarding, promo).
    assert f"{workspace_id}: 4 new, 0 re-evaluated, 0 draft -> ready, 0 expired" in printed
    database = database_for(env["FLOKIT_DATABASE_URL"])
    with database.read() as conn:
        rows = conn.execute(
            sa.select(actions.c.id, actions.c.status, actions.c.parameters).where(
                actions.c.workspace_id == workspace_id, actions.c.type == "budget_shift"
            )
        ).all()
    shifts = [r for r in rows if (r.parameters["from_campaign"], r.parameters["to_campaign"]) == (SOURCE, TARGET)]
    assert [s.status for s in shifts] == ["ready"], rows
    action_id, amount = shifts[0].id, shifts[0].parameters["amount_per_day"]
    assert amount == 100  # min(20 % of each $500 budget, 10 % of the $2,500 managed)
    source_id, target_id = campaign_id(meta, SOURCE), campaign_id(meta, TARGET)

    with running_receiver() as receiver, flokit_up(Path(env["FLOKIT_DATA_DIR"]), env=env) as up:
        wait_until("the API and the daemon", lambda: _ready(up), 240, up)
        hook = flokit(env, "admin", "webhooks", "add", "--workspace", workspace_id, "--url", f"{receiver.url}/hooks",
                      "--events", "action.approved,guardrail.triggered,action.rolled_back")  # fmt: skip
        headers = {"Authorization": f"Bearer {key}"}

        # 3. Approved over v1; the daemon executes it on Meta.
        answer = requests.post(f"{up.api}/v1/actions/{action_id}/approve", headers=headers,
                               json={"approved_by": "maya@acme.test", "note": "go"}, timeout=30)  # fmt: skip
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"] == "ok"  # the spec's answer; the action is now approved

        def detail() -> dict[str, Any]:
            answer = requests.get(f"{up.api}/v1/actions/{action_id}", headers=headers, timeout=30)
            assert answer.status_code == 200, answer.text
            return dict(answer.json()["action"])

        def status() -> str:
            return str(detail()["status"])

        wait_until("the executor", lambda: status() == "running", 180, up)
        decreased, increased = BUDGET_CENTS - round(amount * 100), BUDGET_CENTS + round(amount * 100)
        assert meta.writes == [(source_id, {"daily_budget": str(decreased)}),
                               (target_id, {"daily_budget": str(increased)})]  # fmt: skip

        # 4. Nine days pass; meta_broad's installs get dearer.
        since = (datetime.now(UTC) - COMPRESSED).replace(hour=0, minute=0, second=0, microsecond=0)
        with database.write() as conn:
            conn.execute(sa.update(actions).where(actions.c.id == action_id).values(effective_at=since))
        assert restate_target_spend(env, workspace_id, since) > 0

        # 5. The next refresh: the monitor rolls it back; Meta sees the recorded previous budgets.
        flokit(env, "refresh")
        assert status() == "rolled_back"
        wait_until("the revert", lambda: len(meta.writes) >= 4, 180, up)  # the executor's sensor, again
        assert meta.writes[2:] == [(target_id, {"daily_budget": str(BUDGET_CENTS)}),
                                   (source_id, {"daily_budget": str(BUDGET_CENTS)})]  # fmt: skip
        secret = hook["signing_secret"]
        wait_until("the webhooks", lambda: received(receiver, secret, "action.rolled_back"), 120, up)
        [approved] = received(receiver, secret, "action.approved")
        assert approved["data"]["action"]["id"] == action_id
        triggered = received(receiver, secret, "guardrail.triggered")
        assert triggered, "no guardrail.triggered delivered"
        cpi = [t["data"] for t in triggered if t["data"]["rule"]["metric"] == "cpi"]
        assert cpi and cpi[0]["action"]["id"] == action_id
        assert cpi[0]["observed"] > cpi[0]["threshold"] and cpi[0]["bound"] > cpi[0]["threshold"]
        history = detail()["history"]
        last = [h for h in history if h["entry"] == "transition"][-1]
        assert (last["to_status"], last["trigger"]) == ("rolled_back", "rollback") and "cpi" in last["note"].lower()
    database.dispose()


def _ready(up: Up) -> bool:
    try:
        return requests.get(f"{up.api}/healthz", timeout=2).ok and dagster_ready(up.ui)
    except requests.RequestException:
        return False
