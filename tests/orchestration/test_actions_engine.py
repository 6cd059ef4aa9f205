"""The engine step against a real database (both) and a real lake: proposals with their evidence,
re-evaluation instead of re-proposing, draft → ready, expiry with hysteresis, suppression after a
human's rejection, the volume cap."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta

import pytest

from orchestration.actions.engine import ACTOR, run_engine
from tests.support.engine import FAST, WORLD, connect_registry, signal_rows, write_lake
from transforms.actions import proposals as gen
from warehouse.actions import repository as repo
from warehouse.actions.policy import change_policy
from warehouse.db import Database
from warehouse.settings import Settings
from warehouse.webhooks.tables import webhook_events


def through_and_now() -> tuple:
    # Computed per test (module-level times go stale in a long suite).
    today = datetime.now(UTC).date()
    through = today - timedelta(days=1)
    now = datetime.combine(today, datetime.min.time(), tzinfo=UTC) + timedelta(hours=6)
    return through, now


@pytest.fixture
def seeded(db: Database, settings: Settings, workspace: dict) -> dict:
    ws = workspace["workspace_id"]
    through, now = through_and_now()
    lake = settings.paths.lake()
    write_lake(lake, signal_rows(ws, through, WORLD), through)
    connect_registry(db, ws, WORLD)
    return {"ws": ws, "lake": lake, "through": through, "now": now}


def actions_of(db: Database, ws: str) -> dict[str, repo.Action]:
    with db.read() as conn:
        page, _ = repo.list_actions(conn, workspace_id=ws, limit=100)
    return {a.type: a for a in page}


def evaluations(db: Database, ws: str, action_id: str) -> list[repo.EvaluationRecord]:
    with db.read() as conn:
        return repo.evaluations(conn, workspace_id=ws, action_id=action_id)


def test_first_run_proposes_the_shift_and_the_pause_with_their_evidence(db: Database, seeded: dict) -> None:
    [result] = run_engine(db, seeded["lake"], workspace_id=seeded["ws"], now=seeded["now"])
    assert len(result.created) == 2 and not result.revalidated
    found = actions_of(db, seeded["ws"])
    shift, pause = found["budget_shift"], found["creative_pause"]
    assert shift.parameters == {
        "from_campaign": "slow",
        "to_campaign": "fast",
        "amount_per_day": 20.0,
        "currency": "USD",
    }
    assert pause.parameters == {"creative": "weak_cr", "campaign": "mixed"}
    assert shift.status == pause.status == "ready" and shift.origin == "engine" and shift.created_by == ACTOR
    assert shift.rollback_conditions and len(shift.rollback_rules) == 4
    [proposal] = evaluations(db, seeded["ws"], shift.id)
    assert proposal.kind == "proposal" and proposal.outcome == "proposed"
    assert proposal.engine_version == gen.ENGINE_VERSION
    assert proposal.data_as_of == gen.data_as_of(seeded["through"])
    assert proposal.detail["guardrail_checks"] == shift.guardrail_checks
    assert proposal.detail["evidence"]["source"]["installs"] == 28 * 40
    with db.read() as conn:
        created = [json.loads(r.body) for r in conn.execute(webhook_events.select())]
    assert sorted(e["data"]["action"]["id"] for e in created if e["type"] == "action.created") == sorted(
        [shift.id, pause.id]
    )


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: actions/engine_inputs.py")
def test_a_second_run_re_evaluates_instead_of_proposing_again(db: Database, seeded: dict) -> None:
    run_engine(db, seeded["lake"], workspace_id=seeded["ws"], now=seeded["now"])
    [again] = run_engine(db, seeded["lake"], workspace_id=seeded["ws"], now=seeded["now"] + timedelta(hours=6))
    assert again.created == [] and len(again.revalidated) == 2
    shift = actions_of(db, seeded["ws"])["budget_shift"]
    kinds = [(e.kind, e.outcome) for e in evaluations(db, seeded["ws"], shift.id)]
    assert kinds == [("proposal", "proposed"), ("revalidation", "passed")]


def test_a_draft_becomes_ready_when_a_later_evaluation_passes(db: Database, seeded: dict) -> None:
    late = seeded["now"] + timedelta(days=4)  # the data is 4 days old: data_fresh fails
    run_engine(db, seeded["lake"], workspace_id=seeded["ws"], now=late)
    shift = actions_of(db, seeded["ws"])["budget_shift"]
    assert shift.status == "draft"
    assert [c["check"] for c in shift.guardrail_checks if not c["passed"]] == ["data_fresh"]
    newer = seeded["through"] + timedelta(days=4)
    write_lake(seeded["lake"], signal_rows(seeded["ws"], newer, WORLD), newer)
    [result] = run_engine(db, seeded["lake"], workspace_id=seeded["ws"], now=late)
    assert shift.id in result.promoted  # (the pause, a draft for the same reason, too)
    with db.read() as conn:
        steps = repo.transitions(conn, workspace_id=seeded["ws"], action_id=shift.id)
    assert [(s.trigger, s.to_status, s.actor) for s in steps][-1] == ("guardrails_passed", "ready", ACTOR)


def test_a_faded_signal_expires_only_on_the_second_evaluation_under_the_bar(db: Database, seeded: dict) -> None:
    run_engine(db, seeded["lake"], workspace_id=seeded["ws"], now=seeded["now"])
    shift = actions_of(db, seeded["ws"])["budget_shift"]
    # The campaigns now return the same: the shift's chance to win drops to about a half.
    same = [dataclasses.replace(c, cpi=FAST.cpi, payer_share=FAST.payer_share) for c in WORLD]
    write_lake(seeded["lake"], signal_rows(seeded["ws"], seeded["through"], same), seeded["through"])
    [first] = run_engine(db, seeded["lake"], workspace_id=seeded["ws"], now=seeded["now"] + timedelta(hours=6))
    assert shift.id not in first.expired
    assert actions_of(db, seeded["ws"])["budget_shift"].status == "ready"
    [second] = run_engine(db, seeded["lake"], workspace_id=seeded["ws"], now=seeded["now"] + timedelta(hours=12))
    assert shift.id in second.expired
    with db.read() as conn:
        expired = repo.get_action(conn, workspace_id=seeded["ws"], action_id=shift.id)
        last = repo.transitions(conn, workspace_id=seeded["ws"], action_id=shift.id)[-1]
    assert expired.status == "rejected" and expired.rejected_by == ACTOR
    assert last.trigger == "expire" and last.note.startswith("signal faded: confidence")
    outcomes = [e.outcome for e in evaluations(db, seeded["ws"], shift.id)]
    assert outcomes == ["proposed", "faded", "faded"]


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: actions/engine_inputs.py")
def test_a_human_rejection_is_not_proposed_again(db: Database, seeded: dict) -> None:
    run_engine(db, seeded["lake"], workspace_id=seeded["ws"], now=seeded["now"])
    shift = actions_of(db, seeded["ws"])["budget_shift"]
    with db.write() as conn:
        repo.transition(conn, workspace_id=seeded["ws"], action_id=shift.id, trigger="reject", actor="maya")
    [again] = run_engine(db, seeded["lake"], workspace_id=seeded["ws"], now=seeded["now"] + timedelta(hours=6))
    assert again.created == []
    later = seeded["now"] + timedelta(days=15)  # past suppress_after_reject_days (14)
    newer = seeded["through"] + timedelta(days=15)
    write_lake(seeded["lake"], signal_rows(seeded["ws"], newer, WORLD), newer)
    [after] = run_engine(db, seeded["lake"], workspace_id=seeded["ws"], now=later)
    assert len(after.created) == 1
    with db.read() as conn:
        assert repo.get_action(conn, workspace_id=seeded["ws"], action_id=after.created[0]).type == "budget_shift"


def test_the_policy_caps_new_actions_per_refresh(db: Database, seeded: dict) -> None:
    with db.write() as conn:
        change_policy(conn, workspace_id=seeded["ws"], changes={"max_new_actions_per_refresh": 1}, actor="test")
    [result] = run_engine(db, seeded["lake"], workspace_id=seeded["ws"], now=seeded["now"])
    assert len(result.created) == 1
    assert actions_of(db, seeded["ws"]).keys() == {"creative_pause"}  # the larger expected impact


def test_a_workspace_without_signals_is_skipped(db: Database, settings: Settings, workspace: dict) -> None:
    [result] = run_engine(db, settings.paths.lake(), workspace_id=workspace["workspace_id"])
    assert result.skipped == "no data in the lake yet" and not result.created


def test_a_subject_the_data_stops_covering_expires_after_72_hours(db: Database, seeded: dict) -> None:
    run_engine(db, seeded["lake"], workspace_id=seeded["ws"], now=seeded["now"])
    shift = actions_of(db, seeded["ws"])["budget_shift"]
    # `slow` stops appearing in the signals; the newest data is 4 days newer than the proposal's.
    newer = seeded["through"] + timedelta(days=4)
    rest = [c for c in WORLD if c.name != "slow"]
    write_lake(seeded["lake"], signal_rows(seeded["ws"], newer, rest), newer)
    [result] = run_engine(db, seeded["lake"], workspace_id=seeded["ws"], now=seeded["now"] + timedelta(days=4))
    assert shift.id in result.expired
    with db.read() as conn:
        last = repo.transitions(conn, workspace_id=seeded["ws"], action_id=shift.id)[-1]
    assert (last.trigger, last.actor) == ("expire", ACTOR)
    assert last.note == "signal faded: no evaluable data for more than 72 h"
    assert [e.outcome for e in evaluations(db, seeded["ws"], shift.id)] == ["proposed", "faded"]
