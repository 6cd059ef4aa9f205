"""The executor on both databases, against the fake platforms on 127.0.0.1 and real Dagster runs:
an approval over the API becomes one run, the platform sees ABSOLUTE values in a safe order, the
action runs; a value edited behind FloKit's back is refused; a leg that fails for good is
compensated; a crashed run continues from the ledger without writing twice; a rollback reverts
only what is still FloKit's; creative pauses and offer tests end to end."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import dagster as dg
import polars as pl
import pytest
import sqlalchemy as sa
from flask.testing import FlaskClient

from clients.ad_platform import Retrier
from orchestration.actions.executor import EXECUTOR, execute, finish_offer_test
from orchestration.actions.jobs import execute_action_job, execute_run_config
from orchestration.actions.monitor import ACTOR as MONITOR
from orchestration.actions.monitor import monitor_workspace, run_key_for
from orchestration.actions.sensors import build_execute_action_sensor, execute_action_failure_sensor
from orchestration.adaccounts.sync import client_for, sync_accounts
from orchestration.resources import DatabaseResource, DataDirResource, InstanceKeyResource
from tests.providers.apple_search_ads_fake import (
    CLIENT_ID,
    KEY_ID,
    ORG_ID,
    TEAM_ID,
    AppleSearchAdsFake,
    new_private_key,
)
from tests.providers.meta_graph_fake import ACCOUNT, TOKEN, MetaGraphFake
from tests.support import bearer
from tests.support.engine import Campaign, signal_rows, write_lake
from tests.support.experiments import plant_results
from transforms.actions import ActionContent
from transforms.actions import proposals as gen
from transforms.adaccounts.kinds import validate_config
from transforms.experiments.assignment import Weighted
from transforms.paywall import parse_document
from transforms.reports.schemas import SPEND_SCHEMA
from transforms.webhooks.payloads import PAYLOAD_TYPES, conformance
from warehouse import audit
from warehouse.actions import engine_inputs
from warehouse.actions import executions as ledger
from warehouse.actions import repository as repo
from warehouse.adaccounts import repository as accounts
from warehouse.db import Database
from warehouse.experiments import repository as experiments
from warehouse.lake import Lake
from warehouse.paywalls import configs
from warehouse.reports.report_lake import write_spend_raw
from warehouse.settings import Settings
from warehouse.webhooks.tables import webhook_events

KEY = "k" * 43
NO_WAIT = Retrier(sleep=lambda _s: None, attempts=3)
BUDGET_SHIFT = {"from_campaign": "meta_broad", "to_campaign": "meta_uac", "amount_per_day": 40.0, "currency": "USD"}
CONTENT = ActionContent(
    title="Shift $40/day from meta_broad to meta_uac",
    rationale="meta_uac pays back sooner",
    expected_impact={"metric": "payback_days", "direction": "decrease", "magnitude": 6.0},
    guardrail_checks=[{"check": "statistical_confidence", "passed": True, "detail": "99 %"}],
)


@pytest.fixture(autouse=True)
def instance_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLOKIT_SECRET_KEY", KEY)


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.ephemeral() as running:
        yield running


@pytest.fixture
def lake(settings: Settings) -> Lake:
    return settings.paths.lake()


@pytest.fixture
def meta() -> Iterator[MetaGraphFake]:
    fake = MetaGraphFake()
    broad = fake.add("campaign", "meta_broad", daily_budget=50000)  # CBO: $500.00 a day
    uac = fake.add("campaign", "meta_uac", daily_budget=40000)
    one = fake.add("ad_set", "broad_set_1", parent=broad)
    two = fake.add("ad_set", "broad_set_2", parent=broad)
    fake.add("ad", "meta_broad_cr1", parent=one)
    fake.add("ad", "meta_broad_cr1", parent=two)  # the same creative in two ad sets
    fake.add("ad", "meta_broad_cr2", parent=one)
    fake.add("ad", "meta_uac_cr1", parent=fake.add("ad_set", "uac_set", parent=uac))
    with fake:
        yield fake


def spend(lake: Lake, workspace_id: str, rows: list[tuple[str, str]]) -> None:
    day = datetime.now(UTC).date() - timedelta(days=1)
    frame = pl.DataFrame(
        [{"workspace_id": workspace_id, "spend_date": day, "campaign": c, "creative": k, "country": "US",
          "spend": 100.0, "currency": "USD"} for c, k in rows],
        schema=SPEND_SCHEMA,
    )  # fmt: skip
    write_spend_raw(lake, frame)


def connect(db: Database, lake: Lake, workspace_id: str, platform: str, raw: dict[str, Any]) -> str:
    with db.write() as conn:
        account_id = accounts.connect(
            conn, workspace_id=workspace_id, platform=platform, config=validate_config(platform, raw),
            instance_key=KEY, actor="ops@example.com",
        ).id  # fmt: skip
    [result] = sync_accounts(db, lake, KEY, ad_account_id=account_id, retrier=NO_WAIT)
    assert result.status == "succeeded", result.summary()
    return account_id


def meta_account(db: Database, lake: Lake, ws: str, meta: MetaGraphFake) -> str:
    spend(lake, ws, [("meta_broad", "meta_broad_cr1"), ("meta_broad", "meta_broad_cr2"), ("meta_uac", "meta_uac_cr1")])
    return connect(db, lake, ws, "meta", {"access_token": TOKEN, "ad_account_id": ACCOUNT, "base_url": meta.url})


def propose(db: Database, ws: str, action_type: str, parameters: dict[str, Any] | None) -> str:
    with db.write() as conn:
        return repo.create_action(
            conn, workspace_id=ws, action_type=action_type, content=CONTENT, actor="flokit engine", origin="engine",
            parameters=parameters,
        ).id  # fmt: skip


def approve(client: FlaskClient, workspace: dict, action_id: str) -> None:
    r = client.post(
        f"/v1/actions/{action_id}/approve", json={"approved_by": "ana@acme.com"},
        headers=bearer(workspace["api_key_read_write"]),
    )  # fmt: skip
    assert r.status_code == 200, r.json


def tick(settings: Settings, instance: dg.DagsterInstance, cursor: str | None) -> dg.SensorResult | dg.SkipReason:
    context = dg.build_sensor_context(
        instance=instance, cursor=cursor, resources={"database": DatabaseResource(url=settings.database_url)}
    )
    result = build_execute_action_sensor(5)(context)
    assert isinstance(result, dg.SensorResult | dg.SkipReason)
    return result


def run(settings: Settings, instance: dg.DagsterInstance, request: dg.RunRequest) -> dict[str, Any]:
    """The requested run, executed in process as the daemon would launch it."""
    result = execute_action_job.execute_in_process(
        instance=instance,
        run_config=request.run_config,
        tags=request.tags,
        resources={
            "database": DatabaseResource(url=settings.database_url),
            "data_dir": DataDirResource(root=str(settings.data_dir)),
            "instance_key": InstanceKeyResource(data_dir=str(settings.data_dir)),
        },
    )
    assert result.success
    [materialized] = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
    return {k: v.value for k, v in materialized.event_specific_data.metadata.items()}  # type: ignore[union-attr]


def sensor_runs_once(settings: Settings, instance: dg.DagsterInstance, cursor: str | None = None) -> tuple[dict, str]:
    """One tick requests exactly one run; it runs; a second tick requests none."""
    first = tick(settings, instance, cursor)
    assert isinstance(first, dg.SensorResult) and len(first.run_requests or []) == 1
    [request] = first.run_requests or []
    outcome = run(settings, instance, request)
    assert first.cursor is not None
    assert isinstance(tick(settings, instance, first.cursor), dg.SkipReason)
    return outcome, first.cursor


def retry_of(settings: Settings, instance: dg.DagsterInstance, run_id: str) -> dg.RunRequest | dg.SkipReason:
    """What `execute_action_failure_sensor` answers to the failed run `run_id`."""
    run_record = instance.get_run_by_id(run_id)
    assert run_record is not None
    [failure] = instance.all_logs(run_id, of_type=dg.DagsterEventType.RUN_FAILURE)
    context = dg.build_run_status_sensor_context(
        sensor_name="execute_action_failure_sensor", dagster_instance=instance, dagster_run=run_record,
        dagster_event=failure.dagster_event,  # type: ignore[arg-type]
        resources={"database": DatabaseResource(url=settings.database_url)},
    ).for_run_failure()  # fmt: skip
    result = execute_action_failure_sensor(context)
    assert isinstance(result, dg.RunRequest | dg.SkipReason)
    return result


def action(db: Database, ws: str, action_id: str) -> repo.Action:
    with db.read() as conn:
        return repo.get_action(conn, workspace_id=ws, action_id=action_id)


def rows(db: Database, action_id: str, kind: str) -> list[ledger.Execution]:
    with db.read() as conn:
        return ledger.executions(conn, action_id=action_id, kind=kind)


def ids(meta: MetaGraphFake, name: str) -> list[str]:
    return [i for i, n in meta.objects.items() if n["name"] == name]


def events(db: Database, event_type: str) -> list[dict[str, Any]]:
    with db.read() as conn:
        bodies = conn.execute(sa.select(webhook_events.c.body).where(webhook_events.c.type == event_type)).scalars()
        return [json.loads(b) for b in bodies]


def history(client: FlaskClient, workspace: dict, action_id: str) -> list[dict[str, Any]]:
    r = client.get(f"/v1/actions/{action_id}", headers=bearer(workspace["api_key_read_only"]))
    assert r.status_code == 200
    return list(r.json["action"]["history"])


# --- budget shift on Meta ------------------------------------------------------------------------


def test_an_approval_is_one_run_and_meta_sees_the_absolute_budgets_decrease_first(
    settings: Settings, db: Database, lake: Lake, workspace: dict, client: FlaskClient, meta: MetaGraphFake,
    instance: dg.DagsterInstance,
) -> None:  # fmt: skip
    ws = workspace["workspace_id"]
    meta_account(db, lake, ws, meta)
    action_id = propose(db, ws, "budget_shift", BUDGET_SHIFT)
    assert isinstance(tick(settings, instance, None), dg.SkipReason)  # nothing approved yet
    approve(client, workspace, action_id)
    before = datetime.now(UTC)

    outcome, _cursor = sensor_runs_once(settings, instance)

    [broad], [uac] = ids(meta, "meta_broad"), ids(meta, "meta_uac")
    assert meta.writes == [(broad, {"daily_budget": "46000"}), (uac, {"daily_budget": "44000"})]
    assert (meta.budget(broad), meta.budget(uac)) == (46000, 44000)
    done = action(db, ws, action_id)
    assert done.status == "running" and outcome["result"] == "running"
    assert done.effective_at is not None
    assert before + timedelta(minutes=15) <= done.effective_at <= datetime.now(UTC) + timedelta(minutes=15)
    ledger_rows = rows(db, action_id, "apply")
    assert [(r.leg, r.object_id, r.before, r.after, r.state, r.attempts) for r in ledger_rows] == [
        (1, broad, 50000, 46000, "verified", 1),
        (2, uac, 40000, 44000, "verified", 1),
    ]
    steps = history(client, workspace, action_id)
    assert [s.get("to_status") or s.get("outcome") or s["state"] for s in steps] == [
        "ready", "approved", "passed", "verified", "verified", "running"]  # fmt: skip
    assert "500.00 → 460.00" in steps[2]["summary"] and steps[5]["actor"] == EXECUTOR
    assert {k: steps[3][k] for k in ("entry", "kind", "leg", "object_id", "before", "after", "attempts")} == {
        "entry": "execution", "kind": "apply", "leg": 1, "object_id": broad, "before": 50000, "after": 46000,
        "attempts": 1}  # fmt: skip
    with db.read() as conn:  # the registry follows the read-back values
        assert accounts.get_entity(conn, ad_account_id=ledger_rows[0].ad_account_id or "", entity_type="campaign",
                                   external_id=broad).daily_budget == 46000  # fmt: skip


def test_a_budget_edited_behind_flokits_back_is_refused_without_a_write(
    settings: Settings, db: Database, lake: Lake, workspace: dict, client: FlaskClient, meta: MetaGraphFake,
    instance: dg.DagsterInstance,
) -> None:  # fmt: skip
    ws = workspace["workspace_id"]
    meta_account(db, lake, ws, meta)
    action_id = propose(db, ws, "budget_shift", BUDGET_SHIFT)
    approve(client, workspace, action_id)
    [uac] = ids(meta, "meta_uac")
    meta.edit(uac, daily_budget=42000)  # an operator in Ads Manager, after the sync

    outcome, _ = sensor_runs_once(settings, instance)

    assert meta.writes == [] and outcome["result"] == "rejected"
    refused = action(db, ws, action_id)
    assert (refused.status, refused.rejected_by) == ("rejected", EXECUTOR)
    last = history(client, workspace, action_id)[-1]
    assert last["trigger"] == "abandon" and "meta_uac" in last["note"] and "is 42000, not the 40000" in last["note"]
    preflight = history(client, workspace, action_id)[-2]
    assert (preflight["kind"], preflight["outcome"]) == ("preflight", "refused")
    assert rows(db, action_id, "apply") == []


def test_a_shift_over_the_policy_is_refused(db: Database, lake: Lake, workspace: dict, meta: MetaGraphFake) -> None:
    ws = workspace["workspace_id"]
    meta_account(db, lake, ws, meta)
    # $95 is 9.5 % of $900 managed but 23.75 % of meta_uac's $400: over max_leg_change (20 %).
    action_id = propose(db, ws, "budget_shift", BUDGET_SHIFT | {"amount_per_day": 95})
    with db.write() as conn:
        repo.transition(conn, workspace_id=ws, action_id=action_id, trigger="approve", actor="ana@acme.com")

    outcome = execute(db, lake, KEY, action_id=action_id, kind="apply", retrier=NO_WAIT)

    assert outcome.result == "rejected" and "meta_uac: changes its budget by 23.8%" in outcome.message
    assert meta.writes == [] and action(db, ws, action_id).status == "rejected"


def test_a_second_leg_failing_for_good_compensates_the_first(
    db: Database, lake: Lake, workspace: dict, meta: MetaGraphFake
) -> None:
    ws = workspace["workspace_id"]
    meta_account(db, lake, ws, meta)
    action_id = propose(db, ws, "budget_shift", BUDGET_SHIFT)
    with db.write() as conn:
        repo.transition(conn, workspace_id=ws, action_id=action_id, trigger="approve", actor="ana@acme.com")
    [broad], [uac] = ids(meta, "meta_broad"), ids(meta, "meta_uac")
    meta.fail_writes[uac] = 10  # 5xx beyond the retries

    outcome = execute(db, lake, KEY, action_id=action_id, kind="apply", retrier=NO_WAIT)

    assert outcome.result == "rejected"
    assert (meta.budget(broad), meta.budget(uac)) == (50000, 40000)  # back to the original budgets
    assert [w for w in meta.writes if w[0] == broad] == [(broad, {"daily_budget": "46000"}),
                                                         (broad, {"daily_budget": "50000"})]  # fmt: skip
    assert [(r.leg, r.state) for r in rows(db, action_id, "apply")] == [(1, "compensated"), (2, "failed")]
    rejected = action(db, ws, action_id)
    assert rejected.status == "rejected" and rejected.rejected_by == EXECUTOR
    with db.read() as conn:
        note = repo.transitions(conn, workspace_id=ws, action_id=action_id)[-1].note or ""
    assert "leg 2 (meta_uac) failed on meta" in note and "leg 1 compensated (46000 → 50000)" in note


def test_a_crash_after_the_first_leg_continues_from_the_ledger_without_writing_twice(
    settings: Settings, db: Database, lake: Lake, workspace: dict, meta: MetaGraphFake, instance: dg.DagsterInstance
) -> None:
    ws = workspace["workspace_id"]
    meta_account(db, lake, ws, meta)
    action_id = propose(db, ws, "budget_shift", BUDGET_SHIFT)
    with db.write() as conn:
        repo.transition(conn, workspace_id=ws, action_id=action_id, trigger="approve", actor="ana@acme.com")

    class Crash(Exception):
        pass

    def crashing(*args: Any, **kwargs: Any) -> Any:
        real = client_for(*args, **kwargs)
        original = real.set_daily_budget

        def set_then_die(*a: Any, **k: Any) -> None:
            original(*a, **k)
            raise Crash("the process died after the platform accepted leg 1")

        real.set_daily_budget = set_then_die  # type: ignore[method-assign]
        return real

    with pytest.raises(Crash):
        execute(db, lake, KEY, action_id=action_id, kind="apply", retrier=NO_WAIT, client_factory=crashing)
    assert [(r.leg, r.state) for r in rows(db, action_id, "apply")] == [(1, "sent"), (2, "intent")]

    again = run(settings, instance, dg.RunRequest(run_config=execute_run_config(action_id, "apply")))

    [broad], [uac] = ids(meta, "meta_broad"), ids(meta, "meta_uac")
    assert meta.writes == [(broad, {"daily_budget": "46000"}), (uac, {"daily_budget": "44000"})]  # once each
    assert again["result"] == "running" and action(db, ws, action_id).status == "running"
    assert [(r.leg, r.state, r.attempts) for r in rows(db, action_id, "apply")] == [(1, "verified", 1),
                                                                                  (2, "verified", 1)]  # fmt: skip


def test_a_rollback_over_the_api_reverts_and_a_changed_value_is_left_alone(
    settings: Settings, db: Database, lake: Lake, workspace: dict, client: FlaskClient, meta: MetaGraphFake,
    instance: dg.DagsterInstance,
) -> None:  # fmt: skip
    ws = workspace["workspace_id"]
    meta_account(db, lake, ws, meta)
    action_id = propose(db, ws, "budget_shift", BUDGET_SHIFT)
    approve(client, workspace, action_id)
    _, cursor = sensor_runs_once(settings, instance)
    [broad], [uac] = ids(meta, "meta_broad"), ids(meta, "meta_uac")
    meta.edit(broad, daily_budget=47500)  # the operator raised meta_broad since FloKit lowered it
    meta.writes.clear()

    r = client.post(f"/v1/actions/{action_id}/rollback", headers=bearer(workspace["api_key_read_write"]))
    assert r.status_code == 200 and r.json["action"]["status"] == "rolled_back"
    first = tick(settings, instance, cursor)
    assert isinstance(first, dg.SensorResult)
    [request] = first.run_requests or []
    assert request.run_key is not None and request.run_key.startswith(f"act-revert-{action_id}-")
    outcome = run(settings, instance, request)

    assert meta.writes == [(uac, {"daily_budget": "40000"})]  # meta_uac back; meta_broad untouched
    assert (meta.budget(broad), meta.budget(uac)) == (47500, 40000)
    assert outcome["result"] == "conflict"
    assert [(r.object_id, r.before, r.after, r.state) for r in rows(db, action_id, "revert")] == [
        (uac, 44000, 40000, "verified"),  # the revert's decrease first
        (broad, 46000, 50000, "conflict"),
    ]
    [event] = events(db, "guardrail.triggered")
    assert event["data"]["guardrail"] == "revert_conflict" and event["data"]["action"]["id"] == action_id
    assert event["data"]["action"]["status"] == "rolled_back"
    assert "is 47500, not the 46000 FloKit set" in event["data"]["detail"]
    assert conformance(event["data"], PAYLOAD_TYPES["guardrail.triggered"]) == []
    assert isinstance(tick(settings, instance, first.cursor), dg.SkipReason)
    with db.read() as conn:  # the registry follows the reverted value
        entity = accounts.get_entity(
            conn, ad_account_id=rows(db, action_id, "revert")[0].ad_account_id or "", entity_type="campaign",
            external_id=uac,
        )  # fmt: skip
    assert entity.daily_budget == 40000


# HUF: offset 1 at Meta but two ISO decimals; JPY: no decimals either way; KWD: three ISO decimals,
# not in Meta's table (offset 100). (currency, Meta's budget integers, the registry's ISO minor units,
# the proposal's major units, Meta integers per major unit)
ROUND_TRIP = [
    ("HUF", (50000, 40000), (5000000, 4000000), (50000.0, 40000.0), 1),
    ("JPY", (50000, 40000), (50000, 40000), (50000.0, 40000.0), 1),
    ("KWD", (50000, 40000), (500000, 400000), (500.0, 400.0), 100),
]


@pytest.mark.parametrize(("currency", "on_meta", "registry", "major", "offset"), ROUND_TRIP)
def test_a_budget_in_huf_jpy_or_kwd_survives_the_registry_a_proposal_and_an_execution_on_meta(
    settings: Settings, db: Database, lake: Lake, workspace: dict, client: FlaskClient, instance: dg.DagsterInstance,
    currency: str, on_meta: tuple[int, int], registry: tuple[int, int], major: tuple[float, float], offset: int,
) -> None:  # fmt: skip
    ws = workspace["workspace_id"]
    fake = MetaGraphFake(currency=currency)
    broad = fake.add("campaign", "meta_broad", daily_budget=on_meta[0])
    uac = fake.add("campaign", "meta_uac", daily_budget=on_meta[1])
    fake.add("ad", "meta_broad_cr1", parent=fake.add("ad_set", "broad_set", parent=broad))
    fake.add("ad", "meta_uac_cr1", parent=fake.add("ad_set", "uac_set", parent=uac))
    through = datetime.now(UTC).date() - timedelta(days=1)
    world = (
        Campaign("meta_broad", 40, 2.0, 0.05, 20.0, creatives={"meta_broad_cr1": (1.0, 6, 3)}),
        Campaign("meta_uac", 40, 1.0, 0.10, 20.0, creatives={"meta_uac_cr1": (1.0, 6, 3)}),
    )
    write_lake(lake, signal_rows(ws, through, world), through)
    with fake:
        account_id = meta_account(db, lake, ws, fake)
        with db.read() as conn:  # the registry: ISO minor units
            stored = [accounts.get_entity(conn, ad_account_id=account_id, entity_type="campaign", external_id=i)
                      for i in (broad, uac)]  # fmt: skip
            loaded = engine_inputs.load(conn, lake, ws, datetime.now(UTC))
        assert [(e.daily_budget, e.currency) for e in stored] == [(registry[0], currency), (registry[1], currency)]
        assert loaded is not None
        evaluation = gen.evaluate_budget_shift(*loaded, "meta_broad", "meta_uac")  # the proposal: major units
        assert evaluation is not None
        budgets = evaluation.evidence["budgets"]
        assert (budgets["source"], budgets["target"], budgets["currency"]) == (*major, currency)
        amount = evaluation.parameters["amount_per_day"]
        assert amount == math.floor(0.2 * major[1])  # the leg cap (20 %) of the recipient budget read right
        action_id = propose(db, ws, "budget_shift", evaluation.parameters)
        approve(client, workspace, action_id)

        outcome, _cursor = sensor_runs_once(settings, instance)

        assert outcome["result"] == "running"
        moved = int(amount * offset)  # Meta's integers
        assert fake.writes == [(broad, {"daily_budget": str(on_meta[0] - moved)}),
                               (uac, {"daily_budget": str(on_meta[1] + moved)})]  # fmt: skip
        with db.read() as conn:  # the registry follows, in ISO minor units again
            after = [accounts.get_entity(conn, ad_account_id=account_id, entity_type="campaign", external_id=i)
                     for i in (broad, uac)]  # fmt: skip
        minor_moved = round(amount * 10 ** {"HUF": 2, "JPY": 0, "KWD": 3}[currency])
        assert [e.daily_budget for e in after] == [registry[0] - minor_moved, registry[1] + minor_moved]


# --- creative pause --------------------------------------------------------------------------------


def test_a_creative_pause_pauses_exactly_the_mapped_ads_and_its_revert_unpauses_them(
    db: Database, lake: Lake, workspace: dict, meta: MetaGraphFake
) -> None:
    ws = workspace["workspace_id"]
    meta_account(db, lake, ws, meta)
    action_id = propose(db, ws, "creative_pause", {"creative": "meta_broad_cr1", "campaign": "meta_broad"})
    with db.write() as conn:
        repo.transition(conn, workspace_id=ws, action_id=action_id, trigger="approve", actor="ana@acme.com")

    outcome = execute(db, lake, KEY, action_id=action_id, kind="apply", retrier=NO_WAIT)

    cr1 = ids(meta, "meta_broad_cr1")
    assert outcome.result == "running" and len(cr1) == 2
    assert sorted(meta.writes) == sorted((i, {"status": "PAUSED"}) for i in cr1)
    assert {n["name"]: n["status"] for i, n in meta.objects.items() if n["kind"] == "ad" and i not in cr1} == {
        "meta_broad_cr2": "ACTIVE", "meta_uac_cr1": "ACTIVE"}  # fmt: skip
    started = action(db, ws, action_id)
    assert started.effective_at is not None and started.effective_at - datetime.now(UTC) > timedelta(hours=23)

    with db.write() as conn:
        repo.transition(conn, workspace_id=ws, action_id=action_id, trigger="rollback", actor="ana@acme.com")
    meta.writes.clear()
    reverted = execute(db, lake, KEY, action_id=action_id, kind="revert", retrier=NO_WAIT)

    assert reverted.result == "reverted" and sorted(meta.writes) == sorted((i, {"status": "ACTIVE"}) for i in cr1)
    assert all(meta.objects[i]["status"] == "ACTIVE" for i in cr1)


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: actions/executions.py")
def test_a_revert_the_platform_refuses_fails_its_run_and_is_retried_until_it_lands(
    settings: Settings, db: Database, lake: Lake, workspace: dict, meta: MetaGraphFake, instance: dg.DagsterInstance
) -> None:
    """The rollback is recorded, but Meta refuses the token when the revert runs: the run fails
    (a revert half done must not end quietly), the retry sensor asks again, and once the token
    works again the retried run unpauses the ads."""
    ws = workspace["workspace_id"]
    meta_account(db, lake, ws, meta)
    action_id = propose(db, ws, "creative_pause", {"creative": "meta_broad_cr1", "campaign": "meta_broad"})
    with db.write() as conn:
        repo.transition(conn, workspace_id=ws, action_id=action_id, trigger="approve", actor="ana@acme.com")
    assert execute(db, lake, KEY, action_id=action_id, kind="apply", retrier=NO_WAIT).result == "running"
    with db.write() as conn:
        repo.transition(conn, workspace_id=ws, action_id=action_id, trigger="rollback", actor="ana@acme.com")
    cr1 = ids(meta, "meta_broad_cr1")
    meta.token, meta.writes[:] = "revoked-in-business-manager", []
    request = dg.RunRequest(
        run_key=f"act-revert-{action_id}-1", run_config=execute_run_config(action_id, "revert"),
        tags={"flokit/action_id": action_id, "flokit/execution_kind": "revert"},
    )  # fmt: skip
    failed = execute_action_job.execute_in_process(
        instance=instance, run_config=request.run_config, tags={**request.tags, "dagster/run_key": request.run_key},
        resources={"database": DatabaseResource(url=settings.database_url),
                   "data_dir": DataDirResource(root=str(settings.data_dir)),
                   "instance_key": InstanceKeyResource(data_dir=str(settings.data_dir))},
        raise_on_error=False,
    )  # fmt: skip
    assert not failed.success and meta.writes == []
    assert [r.state for r in rows(db, action_id, "revert")] == ["failed", "failed"]
    assert all(meta.objects[i]["status"] == "PAUSED" for i in cr1)

    again = retry_of(settings, instance, failed.run_id)
    assert isinstance(again, dg.RunRequest) and again.tags["flokit/attempt"] == "2"
    meta.token = TOKEN  # the operator fixed the token
    outcome = run(settings, instance, again)
    assert outcome["result"] == "reverted"
    assert sorted(meta.writes) == sorted((i, {"status": "ACTIVE"}) for i in cr1)
    assert [r.state for r in rows(db, action_id, "revert")] == ["verified", "verified"]


def test_an_action_without_parameters_stays_approved_for_the_operator(
    db: Database, lake: Lake, workspace: dict, meta: MetaGraphFake
) -> None:
    ws = workspace["workspace_id"]
    action_id = propose(db, ws, "budget_shift", None)
    with db.write() as conn:
        repo.transition(conn, workspace_id=ws, action_id=action_id, trigger="approve", actor="ana@acme.com")

    outcome = execute(db, lake, KEY, action_id=action_id, kind="apply")

    assert outcome.result == "nothing_to_apply" and action(db, ws, action_id).status == "approved"
    with db.read() as conn:
        [evaluation] = repo.evaluations(conn, workspace_id=ws, action_id=action_id)
    assert evaluation.kind == "preflight" and "carry it out yourself" in evaluation.detail["summary"]


# --- Apple Search Ads and the sandbox ---------------------------------------------------------------


def test_the_same_shift_on_apple_search_ads(
    settings: Settings, db: Database, lake: Lake, workspace: dict, client: FlaskClient, instance: dg.DagsterInstance
) -> None:
    ws = workspace["workspace_id"]
    key, pem = new_private_key()
    spend(lake, ws, [("asa_brand", "asa_brand_exact"), ("asa_generic", "asa_generic_broad")])
    with AppleSearchAdsFake(public_key=key.public_key()) as fake:
        brand = fake.add_campaign("asa_brand", "250.00")
        generic = fake.add_campaign("asa_generic", "200.00")
        connect(db, lake, ws, "apple_search_ads", {
            "client_id": CLIENT_ID, "team_id": TEAM_ID, "key_id": KEY_ID, "private_key": pem, "org_id": ORG_ID,
            "base_url": fake.url, "token_url": fake.token_url,
        })  # fmt: skip
        action_id = propose(db, ws, "budget_shift", {"from_campaign": "asa_brand", "to_campaign": "asa_generic",
                                                     "amount_per_day": 20, "currency": "USD"})  # fmt: skip
        approve(client, workspace, action_id)
        before = datetime.now(UTC)
        outcome, _ = sensor_runs_once(settings, instance)
        writes = [(path.rsplit("/", 1)[-1], body) for path, body in fake.writes]

    assert outcome["result"] == "running"
    assert writes == [
        (str(brand), {"campaign": {"dailyBudgetAmount": {"amount": "230.00", "currency": "USD"}}}),
        (str(generic), {"campaign": {"dailyBudgetAmount": {"amount": "220.00", "currency": "USD"}}}),
    ]
    started = action(db, ws, action_id)
    assert started.status == "running" and started.effective_at is not None
    assert before <= started.effective_at <= datetime.now(UTC)  # Apple: no documented delay


def test_the_same_shift_on_the_sandbox_changes_only_flokits_records(
    settings: Settings, db: Database, lake: Lake, workspace: dict, client: FlaskClient, instance: dg.DagsterInstance
) -> None:
    ws = workspace["workspace_id"]
    campaigns = [{"name": "meta_broad", "daily_budget": 500, "currency": "USD"},
                 {"name": "meta_uac", "daily_budget": 400, "currency": "USD"}]  # fmt: skip
    spend(lake, ws, [("meta_broad", "cr"), ("meta_uac", "cr")])
    account_id = connect(db, lake, ws, "sandbox", {"campaigns": campaigns})
    action_id = propose(db, ws, "budget_shift", BUDGET_SHIFT)
    approve(client, workspace, action_id)

    outcome, _ = sensor_runs_once(settings, instance)

    with db.read() as conn:
        budgets = {e.name: e.daily_budget for e in accounts.entities(conn, ad_account_id=account_id)}
    assert outcome["result"] == "running" and budgets == {"meta_broad": 46000, "meta_uac": 44000}
    assert [(r.platform, r.before, r.after) for r in rows(db, action_id, "apply")] == [
        ("sandbox", 50000, 46000), ("sandbox", 40000, 44000)]  # fmt: skip
    started = action(db, ws, action_id)
    assert started.status == "running" and started.effective_at is not None


# --- offer tests on the paywall gateway -------------------------------------------------------------


def offer(product_id: str, price: int) -> dict[str, Any]:
    return {"product_id": product_id, "name": product_id, "price_usd_cents": price, "currency": "USD",
            "billing_period": "yearly", "trial_days": 7}  # fmt: skip


LIVE = {"experiment_active": False, "variants": [
    {"variant_id": "main", "layout": "standard", "offers": [offer("annual_49", 4999)], "traffic_weight": 1},
    {"variant_id": "spare", "layout": "standard", "offers": [offer("annual_39", 3999)], "traffic_weight": 0},
]}  # fmt: skip
OFFER_TEST = {"paywall_id": "onboarding", "country": "US", "control_offer": "annual_49", "treatment_offer": "annual_39"}


def approved_offer_test(db: Database, workspace: dict) -> str:
    with db.write() as conn:
        configs.publish(
            conn, app_id=workspace["app_id"], paywall_id="onboarding", document=parse_document(LIVE), actor="ops@acme"
        )
    action_id = propose(db, workspace["workspace_id"], "offer_test", OFFER_TEST)
    with db.write() as conn:
        repo.transition(
            conn, workspace_id=workspace["workspace_id"], action_id=action_id, trigger="approve", actor="ana@acme.com"
        )
    return action_id


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: actions/executions.py, paywalls/configs.py")
def test_an_offer_test_runs_as_an_experiment_and_finishing_stops_it_and_publishes_the_control_back(
    db: Database, lake: Lake, workspace: dict
) -> None:
    ws, app_id = workspace["workspace_id"], workspace["app_id"]
    action_id = approved_offer_test(db, workspace)

    outcome = execute(db, lake, KEY, action_id=action_id, kind="apply")

    with db.read() as conn:
        published = configs.live(conn, app_id=app_id, paywall_id="onboarding")
        running = experiments.for_paywall(conn, app_id, "onboarding").running
        events = conn.execute(sa.select(webhook_events.c.type)).scalars().all()
    assert outcome.result == "running" and published is not None and published.version == 2
    # Everyone outside the test keeps the first variant; the treatment arm is added, served only by the experiment.
    assert not published.document.experiment_active
    assert [(v.variant_id, v.offers[0].product_id, v.traffic_weight) for v in published.document.variants] == [
        ("main", "annual_49", 1.0), ("spare", "annual_39", 0.0),
        (f"treatment_{action_id}", "annual_39", 0.0)]  # fmt: skip
    [experiment] = running
    assert experiment.name == "Offer test: annual_39 against annual_49 in US"
    assert [(v.variant_id, v.weight) for v in experiment.variants] == [("main", 0.5), (f"treatment_{action_id}", 0.5)]
    assert (experiment.audience, experiment.primary_metric) == ({"country": ["US"]}, "revenue_per_user_d14")
    assert experiment.created_by == EXECUTOR and "experiment.started" in events
    [leg] = rows(db, action_id, "apply")
    assert (leg.before, leg.after, leg.state) == ({"version": 1}, {"version": 2, "split": 0.5}, "verified")
    assert leg.last_request["experiment_id"] == experiment.id
    assert action(db, ws, action_id).status == "running"
    again = execute(db, lake, KEY, action_id=action_id, kind="apply")  # a retried apply starts nothing more
    with db.read() as conn:
        assert len(experiments.listed(conn, ws, app_id=app_id, paywall_id="onboarding")) == 1
    assert again.result in ("running", "skipped"), again

    finished = finish_offer_test(db, action(db, ws, action_id), publish="control")
    repeated = finish_offer_test(db, action(db, ws, action_id), publish="control")  # idempotent

    with db.read() as conn:
        back = configs.live(conn, app_id=app_id, paywall_id="onboarding")
        stopped = experiments.get(conn, ws, experiment.id)
    assert [p.version for p in finished] == [3] and repeated == []
    assert back is not None and back.version == 3 and back.document == parse_document(LIVE)
    assert stopped.status == "stopped" and stopped.shipped_variant_id is None


def test_a_won_offer_test_is_finished_by_shipping_the_treatment(db: Database, lake: Lake, workspace: dict) -> None:
    ws, app_id = workspace["workspace_id"], workspace["app_id"]
    action_id = approved_offer_test(db, workspace)
    assert execute(db, lake, KEY, action_id=action_id, kind="apply").result == "running"
    with db.read() as conn:
        [experiment] = experiments.for_paywall(conn, app_id, "onboarding").running

    [shipped] = finish_offer_test(db, action(db, ws, action_id), publish="winner")

    with db.read() as conn:
        stopped = experiments.get(conn, ws, experiment.id)
        entries = audit.entries(conn, workspace_id=ws)
    treatment = f"treatment_{action_id}"
    assert shipped.version == 3 and not shipped.document.experiment_active
    assert [v.variant_id for v in shipped.document.variants] == [treatment, "main", "spare"]
    assert shipped.document.variants[0].offers[0].product_id == "annual_39"
    assert (stopped.status, stopped.shipped_variant_id) == ("stopped", treatment)
    assert any(e["action"] == "experiment.shipped" and e["subject_id"] == experiment.id for e in entries)


@pytest.mark.both_backends(reason="the monitor reads results the refresh upserted per dialect")
def test_the_monitor_reads_the_offer_tests_experiment_and_ships_the_treatment_that_won(
    db: Database, lake: Lake, workspace: dict
) -> None:
    ws, app_id = workspace["workspace_id"], workspace["app_id"]
    action_id = approved_offer_test(db, workspace)
    assert execute(db, lake, KEY, action_id=action_id, kind="apply").result == "running"
    with db.read() as conn:
        [experiment] = experiments.for_paywall(conn, app_id, "onboarding").running
    treatment = f"treatment_{action_id}"

    def check(run: int) -> Any:
        [done] = monitor_workspace(
            db, lake, ws, run_key=run_key_for(run),
            finish_offer_test=lambda a, publish: finish_offer_test(db, a, publish=publish),
        )  # fmt: skip
        return done

    waiting = check(1)  # no refresh has computed results yet
    assert (waiting.outcomes, waiting.transition) == ({"experiment": "pending"}, None)
    # 20 % against 26 % paid at 9.99, 3 000 users each, results computed 20 days in (D14 matured).
    plant_results(db, workspace, experiment.id, {"main": (3000, 600), treatment: (3000, 780)})
    decided = check(2)

    assert (decided.outcomes, decided.transition, decided.publish) == ({"experiment": "ok"}, "complete", "winner")
    with db.read() as conn:
        finished = repo.get_action(conn, workspace_id=ws, action_id=action_id)
        steps = repo.transitions(conn, workspace_id=ws, action_id=action_id)
        shipped = experiments.get(conn, ws, experiment.id)
        live = configs.live(conn, app_id=app_id, paywall_id="onboarding")
        evaluations = [e for e in repo.evaluations(conn, workspace_id=ws, action_id=action_id) if e.kind == "monitor"]
    assert finished.status == "completed" and steps[-1].actor == MONITOR
    assert steps[-1].note is not None and steps[-1].note.startswith(
        "Experiment results: chance the treatment beats the control 100.0% over 3,000 and 3,000 users"
    )
    assert (shipped.status, shipped.shipped_variant_id) == ("stopped", treatment)
    assert live is not None and live.document.variants[0].variant_id == treatment
    assert [e.outcome for e in evaluations] == ["pending", "ok"]
    assert evaluations[-1].detail["experiment_ids"] == [experiment.id]
    assert evaluations[-1].detail["figures"]["exposed_users"] == [3000, 3000]


def test_an_offer_test_on_a_paywall_with_a_running_experiment_is_refused_and_publishes_nothing(
    db: Database, lake: Lake, workspace: dict
) -> None:
    """The first running experiment whose audience holds takes a user: the test would get only what it leaves."""
    ws, app_id = workspace["workspace_id"], workspace["app_id"]
    with db.write() as conn:
        configs.publish(conn, app_id=app_id, paywall_id="onboarding", document=parse_document(LIVE), actor="ops@acme")
        other = experiments.create(
            conn, workspace_id=ws, app_id=app_id, paywall_id="onboarding", name="spare vs main",
            variants=[Weighted("main", 1), Weighted("spare", 1)], holdout_pct=0.0,
            primary_metric="paid_conversion_rate", audience=None, priority=0, actor="ops@acme",
        )  # fmt: skip
        experiments.transition(conn, ws, other.id, "start", actor="ops@acme")
    action_id = propose(db, ws, "offer_test", OFFER_TEST)
    with db.write() as conn:
        repo.transition(conn, workspace_id=ws, action_id=action_id, trigger="approve", actor="ana@acme.com")

    outcome = execute(db, lake, KEY, action_id=action_id, kind="apply")

    assert outcome.result == "rejected" and f"the paywall runs experiments: {app_id}/onboarding ({other.id})" in (
        outcome.message
    )
    with db.read() as conn:
        assert configs.live(conn, app_id=app_id, paywall_id="onboarding").version == 1  # type: ignore[union-attr]
        assert len(experiments.listed(conn, ws, app_id=app_id, paywall_id="onboarding")) == 1


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: adaccounts/repository.py, adaccounts/lake.py")
def test_a_refused_token_puts_the_account_in_error_and_tells_the_workspace(
    db: Database, lake: Lake, workspace: dict, meta: MetaGraphFake
) -> None:
    ws = workspace["workspace_id"]
    account_id = meta_account(db, lake, ws, meta)
    action_id = propose(db, ws, "budget_shift", BUDGET_SHIFT)
    with db.write() as conn:
        repo.transition(conn, workspace_id=ws, action_id=action_id, trigger="approve", actor="ana@acme.com")
    meta.token = "EAAG-rotated-since"  # the stored token was revoked

    outcome = execute(db, lake, KEY, action_id=action_id, kind="apply", retrier=NO_WAIT)

    assert outcome.result == "rejected" and "auth" in outcome.message and meta.writes == []
    with db.read() as conn:
        failed = accounts.get_account_for_operator(conn, ad_account_id=account_id)
    assert failed.status == "error" and "Error validating access token" in (failed.last_error or "")
    [event] = events(db, "integration.error")
    assert (event["data"]["reason"], event["data"]["ad_account_id"]) == ("ad_account_sync_failed", account_id)


def test_a_rerun_finding_a_third_value_refuses_and_compensates_the_verified_legs(
    db: Database, lake: Lake, workspace: dict, meta: MetaGraphFake
) -> None:
    """Leg 2 was sent, then the process died; before the re-run an operator set a third value on
    that campaign: neither FloKit's before nor its after, so the re-run writes nothing there,
    restores leg 1 and gives up."""
    ws = workspace["workspace_id"]
    meta_account(db, lake, ws, meta)
    action_id = propose(db, ws, "budget_shift", BUDGET_SHIFT)
    with db.write() as conn:
        repo.transition(conn, workspace_id=ws, action_id=action_id, trigger="approve", actor="ana@acme.com")
    calls: list[str] = []

    def crashing(*args: Any, **kwargs: Any) -> Any:
        real = client_for(*args, **kwargs)
        original = real.set_daily_budget

        def set_then_die(entity_type: str, external_id: str, *a: Any, **k: Any) -> None:
            original(entity_type, external_id, *a, **k)
            calls.append(external_id)
            if len(calls) == 2:
                raise RuntimeError("the process died after the platform accepted leg 2")

        real.set_daily_budget = set_then_die  # type: ignore[method-assign]
        return real

    with pytest.raises(RuntimeError):
        execute(db, lake, KEY, action_id=action_id, kind="apply", retrier=NO_WAIT, client_factory=crashing)
    [broad], [uac] = ids(meta, "meta_broad"), ids(meta, "meta_uac")
    meta.edit(uac, daily_budget=41000)

    outcome = execute(db, lake, KEY, action_id=action_id, kind="apply", retrier=NO_WAIT)

    assert outcome.result == "rejected" and "is 41000, neither the 40000 FloKit read nor the 44000" in outcome.message
    assert (meta.budget(broad), meta.budget(uac)) == (50000, 41000)
    assert [(r.leg, r.state) for r in rows(db, action_id, "apply")] == [(1, "compensated"), (2, "conflict")]
    assert action(db, ws, action_id).status == "rejected"


def test_a_failed_run_is_requested_again_while_its_approval_waits(
    settings: Settings, db: Database, lake: Lake, workspace: dict, client: FlaskClient, meta: MetaGraphFake,
    instance: dg.DagsterInstance, tmp_path: Any,
) -> None:  # fmt: skip
    """The approval's run dies (its database is unreachable): the retry sensor asks for it again,
    the second run applies it; once the action no longer needs it, or after three runs, it stops."""
    ws = workspace["workspace_id"]
    meta_account(db, lake, ws, meta)
    action_id = propose(db, ws, "budget_shift", BUDGET_SHIFT)
    approve(client, workspace, action_id)
    first = tick(settings, instance, None)
    assert isinstance(first, dg.SensorResult)
    [request] = first.run_requests or []
    gone = DatabaseResource(url=f"sqlite:///{tmp_path}/missing/flokit.db")  # its directory does not exist
    failed = execute_action_job.execute_in_process(
        instance=instance, run_config=request.run_config, tags={**request.tags, "dagster/run_key": request.run_key},
        resources={"database": gone, "data_dir": DataDirResource(root=str(settings.data_dir)),
                   "instance_key": InstanceKeyResource(data_dir=str(settings.data_dir))},
        raise_on_error=False,
    )  # fmt: skip
    assert not failed.success and meta.writes == []

    def retry(run_id: str) -> dg.RunRequest | dg.SkipReason:
        return retry_of(settings, instance, run_id)

    again = retry(failed.run_id)
    assert isinstance(again, dg.RunRequest)
    assert again.run_key == f"{request.run_key}:attempt-2" and again.tags["flokit/attempt"] == "2"
    outcome = run(settings, instance, again)
    assert outcome["result"] == "running" and action(db, ws, action_id).status == "running"
    [broad], [uac] = ids(meta, "meta_broad"), ids(meta, "meta_uac")
    assert meta.writes == [(broad, {"daily_budget": "46000"}), (uac, {"daily_budget": "44000"})]
    # Nothing left to apply now: the same failure asks for nothing more.
    assert isinstance(retry(failed.run_id), dg.SkipReason)

    # A third failed run of an approval that still waits is the last one asked for.
    other = propose(db, ws, "budget_shift", {**BUDGET_SHIFT, "amount_per_day": 10.0})
    approve(client, workspace, other)
    third = execute_action_job.execute_in_process(
        instance=instance, run_config=execute_run_config(other, "apply"),
        tags={"flokit/action_id": other, "flokit/execution_kind": "apply", "flokit/attempt": "3"},
        resources={"database": gone, "data_dir": DataDirResource(root=str(settings.data_dir)),
                   "instance_key": InstanceKeyResource(data_dir=str(settings.data_dir))},
        raise_on_error=False,
    )  # fmt: skip
    assert not third.success
    gave_up = retry(third.run_id)
    assert isinstance(gave_up, dg.SkipReason) and "3 runs failed" in (gave_up.skip_message or "")
