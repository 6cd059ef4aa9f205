"""Action rows on both databases: one-statement transitions, tenancy, order, history."""

import itertools
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from tests.support import run_together
from tests.support.actions import literal_content, seed_queue
from warehouse.actions import repository as repo
from warehouse.bootstrap import bootstrap
from warehouse.db import Database
from warehouse.errors import Conflict, NotFound, TransitionRefused

T0 = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def create(db: Database, ws: str, action_type: str = "budget_shift", *, at: datetime = T0, **kw) -> repo.Action:
    content = literal_content(action_type, **kw)
    with db.write() as conn:
        return repo.create_action(
            conn, workspace_id=ws, action_type=action_type, content=content, actor="t", origin="demo", at=at
        )


def fire(db: Database, ws: str, action_id: str, trigger: str, actor: str = "ana@example.com") -> repo.Action:
    with db.write() as conn:
        return repo.transition(conn, workspace_id=ws, action_id=action_id, trigger=trigger, actor=actor, note="n")


def test_created_action_is_ready_and_a_failing_guardrail_makes_a_draft(db: Database, workspace: dict) -> None:
    ws = workspace["workspace_id"]
    assert create(db, ws).status == "ready"
    assert create(db, ws, "offer_test", guardrails_pass=False).status == "draft"


def test_approve_sets_approved_at_and_by_and_records_history(db: Database, workspace: dict) -> None:
    ws = workspace["workspace_id"]
    action = create(db, ws)
    approved = fire(db, ws, action.id, "approve")
    assert approved.status == "approved" and approved.approved_by == "ana@example.com"
    assert approved.approved_at is not None and approved.approved_at > action.created_at
    with db.read() as conn:
        steps = repo.transitions(conn, workspace_id=ws, action_id=action.id)
    assert [(s.trigger, s.from_status, s.to_status) for s in steps] == [
        ("create", None, "ready"),
        ("approve", "ready", "approved"),
    ]
    assert steps[1].actor == "ana@example.com" and steps[1].note == "n"


def test_every_other_trigger_is_a_conflict_that_changes_nothing(db: Database, workspace: dict) -> None:
    ws = workspace["workspace_id"]
    action = create(db, ws)
    for trigger in ("start", "complete", "rollback", "guardrails_passed"):
        with pytest.raises(TransitionRefused) as info:
            fire(db, ws, action.id, trigger)
        assert info.value.status == "ready"
    fire(db, ws, action.id, "approve")
    with pytest.raises(Conflict, match="must be ready"):
        fire(db, ws, action.id, "approve")
    with pytest.raises(Conflict):
        fire(db, ws, action.id, "reject")
    with db.read() as conn:
        assert repo.get_action(conn, workspace_id=ws, action_id=action.id).status == "approved"
        assert len(repo.transitions(conn, workspace_id=ws, action_id=action.id)) == 2


def test_full_lifecycle_and_rollback_rules_by_type(db: Database, workspace: dict) -> None:
    ws = workspace["workspace_id"]
    for action_type, rollback_ok in (("budget_shift", True), ("creative_pause", True), ("offer_test", False)):
        action = create(db, ws, action_type)
        for trigger in ("approve", "start", "complete"):
            action = fire(db, ws, action.id, trigger)
        assert action.status == "completed"
        if rollback_ok:
            rolled = fire(db, ws, action.id, "rollback")
            assert rolled.status == "rolled_back" and rolled.rolled_back_at is not None
        else:
            with pytest.raises(Conflict, match="cannot be rolled back"):
                fire(db, ws, action.id, "rollback")


def test_reject_from_draft_or_ready_only(db: Database, workspace: dict) -> None:
    ws = workspace["workspace_id"]
    draft = create(db, ws, "offer_test", guardrails_pass=False)
    rejected = fire(db, ws, draft.id, "reject", actor="lee")
    assert rejected.status == "rejected" and rejected.rejected_by == "lee"
    with pytest.raises(Conflict):
        fire(db, ws, draft.id, "reject")


def test_other_workspaces_actions_are_not_found(db: Database, workspace: dict) -> None:
    action = create(db, workspace["workspace_id"])
    with db.write() as conn:
        other = bootstrap(conn, name="Other Co")["workspace_id"]
    with pytest.raises(NotFound):
        fire(db, other, action.id, "approve")
    with db.read() as conn, pytest.raises(NotFound):
        repo.get_action(conn, workspace_id=other, action_id=action.id)
    with db.read() as conn:
        assert repo.list_actions(conn, workspace_id=other) == ([], 0)
        assert repo.get_action(conn, workspace_id=workspace["workspace_id"], action_id=action.id).status == "ready"
    with pytest.raises(NotFound):
        fire(db, workspace["workspace_id"], "act_missing", "approve")


def test_list_is_newest_first_then_id_with_filter_and_pages(db: Database, workspace: dict) -> None:
    ws = workspace["workspace_id"]
    same_time = [create(db, ws, at=T0) for _ in range(3)]
    older = create(db, ws, at=T0 - timedelta(hours=1))
    newer = create(db, ws, at=T0 + timedelta(hours=1))
    fire(db, ws, older.id, "approve")
    expected = [newer.id, *sorted((a.id for a in same_time), reverse=True), older.id]
    with db.read() as conn:
        page, total = repo.list_actions(conn, workspace_id=ws, limit=100)
        assert [a.id for a in page] == expected and total == 5
        page, total = repo.list_actions(conn, workspace_id=ws, limit=2, offset=2)
        assert [a.id for a in page] == expected[2:4] and total == 5
        page, total = repo.list_actions(conn, workspace_id=ws, status="approved")
        assert [a.id for a in page] == [older.id] and total == 1
        assert repo.list_actions(conn, workspace_id=ws, offset=10) == ([], 5)


def test_two_simultaneous_approvals_exactly_one_wins(db: Database, workspace: dict) -> None:
    ws = workspace["workspace_id"]
    for _ in range(5):
        action = create(db, ws)
        results = run_together(
            lambda a=action: fire(db, ws, a.id, "approve", actor="a"),
            lambda a=action: fire(db, ws, a.id, "approve", actor="b"),
        )
        outcomes = sorted("conflict" if isinstance(r, Conflict) else r.status for r in results)
        assert outcomes == ["approved", "conflict"]
        with db.read() as conn:
            steps = repo.transitions(conn, workspace_id=ws, action_id=action.id)
        assert [s.trigger for s in steps] == ["create", "approve"]


def test_a_queue_in_every_status_has_a_coherent_history(db: Database, workspace: dict) -> None:
    ws = workspace["workspace_id"]
    with db.write() as conn:
        created = seed_queue(conn, workspace_id=ws)
    assert {a.origin for a in created} == {"api"}
    statuses = Counter(a.status for a in created)
    assert set(statuses) == {"draft", "ready", "approved", "running", "completed", "rejected", "rolled_back"}
    with db.read() as conn:
        page, total = repo.list_actions(conn, workspace_id=ws)
        assert total == len(created) and page[0].created_at >= page[-1].created_at
        for action in created:
            steps = repo.transitions(conn, workspace_id=ws, action_id=action.id)
            assert steps[-1].to_status == action.status
            assert all(a.to_status == b.from_status for a, b in itertools.pairwise(steps))
