"""The monitor in real Dagster runs over a real lake and database (both backends): a planted
deterioration after a change rolls the action back as `flokit monitor` with `guardrail.triggered`
and `action.rolled_back` in the outbox; with auto_rollback off only the webhook goes out (once);
an observation window that ends with no breach completes the action; an offer test that breaches
is completed, not rolled back; one materialization is evaluated once; `flokit refresh` runs it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
import pytest
import sqlalchemy as sa

from orchestration.actions.monitor import (
    ACTOR,
    monitor_actions_job,
    monitor_actions_sensor,
    monitor_workspace,
    run_key_for,
)
from orchestration.definitions import build_definitions
from orchestration.refresh import refresh
from tests.support.monitor import CPI_RULE, TRIAL_RULE, plant, running_action, signal_row, times
from transforms.actions.rules import RollbackRule, render
from transforms.reports.schemas import ACTION_SIGNAL_SCHEMA
from warehouse.actions import repository
from warehouse.actions.policy import change_policy
from warehouse.db import Database
from warehouse.reports import report_lake
from warehouse.settings import Settings
from warehouse.webhooks.tables import webhook_events


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.ephemeral() as instance:
        yield instance


def events(db: Database, event_type: str) -> list[dict[str, Any]]:
    with db.read() as conn:
        bodies = conn.execute(
            sa.select(webhook_events.c.body).where(
                webhook_events.c.type == event_type, webhook_events.c.test.is_(False)
            )
        ).scalars()
        return [json.loads(b)["data"] for b in bodies]


def run_monitor(settings: Settings, instance: dg.DagsterInstance) -> dg.ExecuteInProcessResult | None:
    """What the daemon does: the sensor notices the latest action_signals materialization and
    requests a run, which is executed here."""
    result = monitor_actions_sensor(dg.build_sensor_context(instance=instance, cursor=None))
    if isinstance(result, dg.SkipReason):
        return None
    assert isinstance(result, dg.SensorResult)
    (request,) = result.run_requests or []
    job = build_definitions(settings).resolve_job_def(monitor_actions_job.name)
    return job.execute_in_process(instance=instance, run_config=request.run_config, tags=request.tags)


def materialized(instance: dg.DagsterInstance) -> None:
    instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=report_lake.ACTION_SIGNALS))


def test_a_planted_deterioration_rolls_the_action_back(
    settings: Settings, db: Database, workspace: dict, instance: dg.DagsterInstance
) -> None:
    ws = workspace["workspace_id"]
    effective, today = times()
    plant(settings.paths.lake(), ws, effective, today, {"installs": 100, "spend": 200.0, "trials": 30},
          {"installs": 100, "spend": 400.0, "trials": 30})  # fmt: skip
    action_id = running_action(db, ws, effective, [CPI_RULE, TRIAL_RULE])
    assert run_monitor(settings, instance) is None  # no materialization yet: nothing to do
    materialized(instance)
    result = run_monitor(settings, instance)
    assert result is not None and result.success
    with db.read() as conn:
        action = repository.get_action(conn, workspace_id=ws, action_id=action_id)
        steps = repository.transitions(conn, workspace_id=ws, action_id=action_id)
        checks = repository.evaluations(conn, workspace_id=ws, action_id=action_id)
    assert action.status == "rolled_back" and action.rolled_back_at is not None
    last = steps[-1]
    assert (last.trigger, last.actor) == ("rollback", ACTOR)
    assert last.note is not None and last.note.startswith(render(CPI_RULE)) and "observed 4" in last.note
    by_rule = {c.detail["rule_id"]: c for c in checks if c.kind == "monitor"}
    assert by_rule["rb_cpi"].outcome == "breach" and by_rule["rb_trials"].outcome == "ok"
    cpi = by_rule["rb_cpi"].detail
    assert cpi["observed"] == pytest.approx(4.0) and cpi["baseline"] == pytest.approx(2.0)
    assert cpi["threshold"] == pytest.approx(2.6) and 2.6 < cpi["bound"] < 4.0 and cpi["sample"] == 700
    (triggered,) = events(db, "guardrail.triggered")
    assert triggered["guardrail"] == "rollback_rule" and triggered["action"]["id"] == action_id
    assert triggered["rule"]["id"] == "rb_cpi" and triggered["rule"]["threshold"]["value"] == 1.3
    assert triggered["observed"] == pytest.approx(4.0) and triggered["bound"] == pytest.approx(cpi["bound"])
    assert triggered["threshold"] == pytest.approx(2.6) and render(CPI_RULE) in triggered["detail"]
    assert [e["action"]["id"] for e in events(db, "action.rolled_back")] == [action_id]


def test_with_auto_rollback_off_only_the_webhook_goes_out_once(
    settings: Settings, db: Database, workspace: dict, instance: dg.DagsterInstance
) -> None:
    ws = workspace["workspace_id"]
    effective, today = times()
    plant(settings.paths.lake(), ws, effective, today, {"installs": 100, "spend": 200.0, "trials": 30},
          {"installs": 100, "spend": 200.0, "trials": 10})  # fmt: skip
    action_id = running_action(db, ws, effective, [CPI_RULE, TRIAL_RULE])
    with db.write() as conn:
        change_policy(conn, workspace_id=ws, changes={"auto_rollback": False}, actor="maya")
    for _ in range(2):  # two refreshes, the breach persists
        materialized(instance)
        result = run_monitor(settings, instance)
        assert result is not None and result.success
    with db.read() as conn:
        action = repository.get_action(conn, workspace_id=ws, action_id=action_id)
        checks = [c for c in repository.evaluations(conn, workspace_id=ws, action_id=action_id) if c.kind == "monitor"]
    assert action.status == "running"
    assert [(c.detail["rule_id"], c.outcome) for c in checks] == [("rb_cpi", "ok"), ("rb_trials", "breach")] * 2
    (triggered,) = events(db, "guardrail.triggered")  # announced at the first breach only
    assert triggered["rule"]["id"] == "rb_trials" and triggered["observed"] == pytest.approx(0.1)
    assert events(db, "action.rolled_back") == []


def test_an_observation_window_that_ends_with_no_breach_completes_the_action(
    settings: Settings, db: Database, workspace: dict, instance: dg.DagsterInstance
) -> None:
    ws = workspace["workspace_id"]
    today = datetime.now(UTC).date()
    effective = datetime.combine(today - timedelta(days=15), datetime.min.time(), UTC) + timedelta(hours=12)
    same = {"installs": 100, "spend": 200.0, "trials": 30}
    plant(settings.paths.lake(), ws, effective, today, same, same)
    action_id = running_action(db, ws, effective, [CPI_RULE, TRIAL_RULE])
    fresh = running_action(db, ws, datetime.now(UTC) - timedelta(hours=2), [CPI_RULE])  # still in its grace period
    materialized(instance)
    result = run_monitor(settings, instance)
    assert result is not None and result.success
    with db.read() as conn:
        done = repository.get_action(conn, workspace_id=ws, action_id=action_id)
        steps = repository.transitions(conn, workspace_id=ws, action_id=action_id)
        young = repository.get_action(conn, workspace_id=ws, action_id=fresh)
        young_checks = repository.evaluations(conn, workspace_id=ws, action_id=fresh)
    assert done.status == "completed" and done.completed_at is not None
    assert (steps[-1].trigger, steps[-1].actor) == ("complete", ACTOR) and "14 days" in (steps[-1].note or "")
    assert young.status == "running" and [c.outcome for c in young_checks if c.kind == "monitor"] == ["pending"]
    assert events(db, "guardrail.triggered") == []


def test_one_materialization_is_evaluated_once(settings: Settings, db: Database, workspace: dict) -> None:
    ws = workspace["workspace_id"]
    effective, today = times()
    same = {"installs": 100, "spend": 200.0, "trials": 30}
    lake = settings.paths.lake()
    plant(lake, ws, effective, today, same, same)
    action_id = running_action(db, ws, effective, [CPI_RULE, TRIAL_RULE])
    first = monitor_workspace(db, lake, ws, run_key=run_key_for(7))
    again = monitor_workspace(db, lake, ws, run_key=run_key_for(7))
    assert [c.already_evaluated for c in first + again] == [False, True]
    assert again[0].outcomes == {"rb_cpi": "ok", "rb_trials": "ok"}
    monitor_workspace(db, lake, ws, run_key=run_key_for(8))
    with db.read() as conn:
        checks = [c for c in repository.evaluations(conn, workspace_id=ws, action_id=action_id) if c.kind == "monitor"]
    assert [c.detail["run_key"] for c in checks] == [run_key_for(7)] * 2 + [run_key_for(8)] * 2


def test_an_offer_test_that_breaches_is_completed_with_the_reason(
    settings: Settings, db: Database, workspace: dict
) -> None:
    ws = workspace["workspace_id"]
    effective, today = times()
    lake = settings.paths.lake()
    first = effective.date() - timedelta(days=14)
    days = [first + timedelta(days=k) for k in range((today - first).days + 1)]
    rows = []
    for d in days:
        if d <= effective.date():
            rows.append({**signal_row(d, today, installs=100, paywall_users=100), "workspace_id": ws})
        else:  # the treatment arm gets far fewer users than the planned 50/50
            rows.append({**signal_row(d, today, installs=90, paywall_users=90), "workspace_id": ws})
            rows.append({**signal_row(d, today, installs=40, paywall_users=40, offer="annual"), "workspace_id": ws})
    report_lake.write_days(
        lake, report_lake.ACTION_SIGNALS, days, pl.DataFrame(rows, schema=ACTION_SIGNAL_SCHEMA), pl.col("cohort_date")
    )
    srm = RollbackRule(
        id="rb_srm", metric="srm", scope_entity="paywall", scope_name="main", comparator="lt",
        threshold_kind="absolute", threshold_value=0.001, baseline_window_days=None, window_max_days=28,
        min_sample_unit="users", min_sample_value=200, grace_hours=24, test="consecutive", on_breach="rollback",
    )  # fmt: skip
    params = {"paywall_id": "pw_1", "country": "US", "control_offer": "monthly", "treatment_offer": "annual"}
    action_id = running_action(db, ws, effective, [srm], action_type="offer_test", parameters=params)
    finished: list[tuple[str, str]] = []
    checks = monitor_workspace(
        db, lake, ws, run_key=run_key_for(1), finish_offer_test=lambda a, publish: finished.append((a.id, publish))
    )
    assert checks[0].outcomes == {"rb_srm": "breach"} and checks[0].transition == "complete"
    with db.read() as conn:
        action = repository.get_action(conn, workspace_id=ws, action_id=action_id)
        steps = repository.transitions(conn, workspace_id=ws, action_id=action_id)
    assert action.status == "completed" and steps[-1].actor == ACTOR
    assert steps[-1].note is not None and steps[-1].note.startswith("Stopped (an offer test is not rolled back)")
    assert finished == [(action_id, "control")]
    (triggered,) = events(db, "guardrail.triggered")
    assert triggered["rule"]["metric"] == "srm" and triggered["observed"] < 0.001


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: catalog.py, actions/repository.py")
def test_flokit_refresh_checks_the_running_actions_last(
    settings: Settings, db: Database, workspace: dict, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    ws = workspace["workspace_id"]
    effective, today = times()
    lake = settings.paths.lake()
    defs = build_definitions(settings)
    assert [o.name for o in refresh(defs, instance, db, lake)] == [
        "actions_engine",
        "analyst_catalog",
    ]  # nothing running
    # The signals as a refresh wrote them (not their inputs, which would make the reports rewrite them).
    plant(lake, ws, effective, today, {"installs": 100, "spend": 200.0, "trials": 30},
          {"installs": 100, "spend": 400.0, "trials": 30}, with_spend=False)  # fmt: skip
    action_id = running_action(db, ws, effective, [CPI_RULE])
    lines: list[str] = []
    outcomes = refresh(defs, instance, db, lake, lines.append)
    assert [(o.name, o.success) for o in outcomes] == [
        ("actions_engine", True),
        ("analyst_catalog", True),
        ("monitor_actions", True),
    ]
    assert "1 running growth action(s) to check" in lines
    with db.read() as conn:
        assert repository.get_action(conn, workspace_id=ws, action_id=action_id).status == "rolled_back"
