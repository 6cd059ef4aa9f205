"""The engine's half of the action store on both databases: parameters, fingerprints (one open
action each, enforced by the database), rendered rollback rules, evaluations in the history, the
second wave's transitions, and the per-workspace policy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.support import run_together
from transforms.actions import ActionContent
from transforms.actions.policy import DEFAULT, PolicyProblem
from transforms.actions.rules import RollbackRule
from warehouse import audit
from warehouse.actions import policy as policies
from warehouse.actions import repository as repo
from warehouse.bootstrap import bootstrap
from warehouse.db import Database
from warehouse.errors import Conflict, NotFound

T0 = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
FINGERPRINT = "a" * 64
PARAMETERS = {"from_campaign": "meta_broad", "to_campaign": "google_uac", "amount_per_day": 40.0, "currency": "USD"}
CONTENT = ActionContent(
    title="Shift $40/day from meta_broad to google_uac",
    rationale="google_uac returns more per dollar at day 30",
    expected_impact={"metric": "roas_30d", "direction": "increase", "magnitude": 0.012},
    data_signals=[{"label": "ROAS 30d, google_uac", "value": "1.15"}],
    guardrail_checks=[{"check": "statistical_confidence", "passed": True, "detail": "99.0 %"}],
)


def cpi_rule(rule_id: str = "rb1") -> RollbackRule:
    return RollbackRule(
        id=rule_id, metric="cpi", scope_entity="campaign", scope_name="google_uac", comparator="gt",
        threshold_kind="relative_to_baseline", threshold_value=1.3, baseline_window_days=14, window_max_days=14,
        min_sample_unit="installs", min_sample_value=150, grace_hours=24, test="confidence_sequence",
        alpha=0.1, n_star=1500, on_breach="rollback",
    )  # fmt: skip


def propose(db: Database, ws: str, *, fingerprint: str | None = FINGERPRINT, at: datetime = T0) -> repo.Action:
    with db.write() as conn:
        return repo.create_action(
            conn, workspace_id=ws, action_type="budget_shift", content=CONTENT, actor="flokit engine",
            origin="engine", parameters=PARAMETERS, fingerprint=fingerprint, rollback_rules=[cpi_rule()], at=at,
        )  # fmt: skip


def fire(db: Database, ws: str, action_id: str, trigger: str, actor: str = "flokit engine", **kw) -> repo.Action:
    with db.write() as conn:
        return repo.transition(conn, workspace_id=ws, action_id=action_id, trigger=trigger, actor=actor, **kw)


def test_parameters_rules_and_origin_are_stored_and_the_conditions_rendered_from_the_rules(
    db: Database, workspace: dict
) -> None:
    ws = workspace["workspace_id"]
    created = propose(db, ws)
    with db.read() as conn:
        action = repo.get_action(conn, workspace_id=ws, action_id=created.id)
    assert action == created
    assert (action.status, action.origin, action.fingerprint) == ("ready", "engine", FINGERPRINT)
    assert action.parameters == PARAMETERS
    assert action.rollback_rules == [cpi_rule().to_dict()]
    assert action.rollback_conditions == [
        "Roll back if CPI of campaign google_uac rises more than 30% above its 14-day baseline, "
        "measured on installs since the change (after 24 h and at least 150 installs)"
    ]
    assert RollbackRule.from_dict(action.rollback_rules[0]) == cpi_rule()


def test_conditions_without_rules_behind_them_are_refused(db: Database, workspace: dict) -> None:
    content = ActionContent("t", "r", {"metric": "m", "direction": "d", "magnitude": 1.0}, rollback_conditions=["x"])
    with db.write() as conn, pytest.raises(ValueError, match="rendered from rollback_rules"):
        repo.create_action(
            conn, workspace_id=workspace["workspace_id"], action_type="budget_shift", content=content, actor="e",
            origin="engine", rollback_rules=[cpi_rule()],
        )  # fmt: skip


def test_one_open_action_per_fingerprint_and_the_caller_can_re_evaluate_the_open_one(
    db: Database, workspace: dict
) -> None:
    ws = workspace["workspace_id"]
    first = propose(db, ws)
    with db.write() as conn:
        with pytest.raises(repo.AlreadyOpen) as info:
            repo.create_action(
                conn, workspace_id=ws, action_type="budget_shift", content=CONTENT, actor="flokit engine",
                origin="engine", fingerprint=FINGERPRINT,
            )  # fmt: skip
        assert info.value.action_id == first.id and isinstance(info.value, Conflict)
        # The transaction is still usable: the engine records the re-evaluation on the open action.
        repo.record_evaluation(
            conn, action_id=info.value.action_id, kind="revalidation", outcome="passed", detail={"ctw": 0.97},
            workspace_id=ws,
            engine_version="1", data_as_of=T0,
        )  # fmt: skip
    with db.read() as conn:
        assert repo.list_actions(conn, workspace_id=ws)[1] == 1
        assert [e.kind for e in repo.evaluations(conn, workspace_id=ws, action_id=first.id)] == ["revalidation"]
    # Another workspace's fingerprints are its own; an action without one never conflicts.
    with db.write() as conn:
        other = bootstrap(conn, name="Other Co")["workspace_id"]
    assert propose(db, other).fingerprint == FINGERPRINT
    assert propose(db, ws, fingerprint=None).fingerprint is None
    assert propose(db, ws, fingerprint=None).fingerprint is None
    # Closed (the signal faded): the same proposal may open again.
    fire(db, ws, first.id, "expire", note="signal faded")
    again = propose(db, ws)
    assert again.id != first.id and again.status == "ready"


def test_two_engine_runs_racing_open_the_proposal_once(db: Database, workspace: dict) -> None:
    ws = workspace["workspace_id"]
    for round_ in range(4):
        fingerprint = f"{round_}" * 64
        results = run_together(*[lambda f=fingerprint: propose(db, ws, fingerprint=f) for _ in range(2)])
        opened = [r for r in results if isinstance(r, repo.Action)]
        refused = [r for r in results if isinstance(r, repo.AlreadyOpen)]
        assert len(opened) == 1 and len(refused) == 1, results
        assert refused[0].action_id == opened[0].id


def test_second_wave_transitions_set_their_timestamps(db: Database, workspace: dict) -> None:
    ws = workspace["workspace_id"]
    faded = fire(db, ws, propose(db, ws, fingerprint=None).id, "expire", note="signal faded")
    assert (faded.status, faded.rejected_by, faded.previous_status) == ("rejected", "flokit engine", "ready")
    assert faded.rejected_at is not None

    approved = fire(db, ws, propose(db, ws, fingerprint=None).id, "approve", actor="ana@example.com")
    with pytest.raises(Conflict, match="must be draft or ready"):
        fire(db, ws, approved.id, "expire")
    given_up = fire(db, ws, approved.id, "abandon", actor="flokit executor", note="preflight: budget edited")
    assert (given_up.status, given_up.rejected_by) == ("rejected", "flokit executor")

    action = fire(db, ws, propose(db, ws, fingerprint=None).id, "approve", actor="ana@example.com")
    effective = T0 + timedelta(minutes=15)
    running = fire(db, ws, action.id, "start", actor="flokit executor", effective_at=effective)
    assert running.effective_at == effective and running.completed_at is None
    done = fire(db, ws, action.id, "complete", actor="flokit monitor")
    assert done.status == "completed" and done.completed_at is not None
    with db.read() as conn:
        steps = repo.transitions(conn, workspace_id=ws, action_id=given_up.id)
    assert [(s.trigger, s.to_status, s.actor) for s in steps][-1] == ("abandon", "rejected", "flokit executor")


def test_evaluations_are_checked_and_merged_into_the_history_oldest_first(db: Database, workspace: dict) -> None:
    ws = workspace["workspace_id"]
    action = propose(db, ws, fingerprint=None, at=T0)
    with db.write() as conn:
        proposal = repo.record_evaluation(
            conn, action_id=action.id, workspace_id=ws, kind="proposal", outcome="proposed", detail={"n": [300, 310]},
            engine_version="1", data_as_of=T0 - timedelta(hours=2), at=T0,
        )  # fmt: skip
        repo.record_evaluation(
            conn, action_id=action.id, kind="revalidation", outcome="passed", detail={}, engine_version="1",
            workspace_id=ws,
            data_as_of=T0, at=T0 + timedelta(hours=6),
        )  # fmt: skip
        with pytest.raises(ValueError, match="unknown evaluation kind"):
            repo.record_evaluation(
                conn,
                action_id=action.id,
                workspace_id=ws,
                kind="guess",
                outcome="ok",
                detail={},
                engine_version=None,
                data_as_of=None,
            )
        with pytest.raises(ValueError, match="unknown outcome"):
            repo.record_evaluation(
                conn, action_id=action.id, kind="monitor", outcome="fine", detail={}, engine_version=None,
                workspace_id=ws,
                data_as_of=None,
            )  # fmt: skip
        with pytest.raises(NotFound):
            repo.record_evaluation(
                conn, action_id="act_missing", kind="monitor", outcome="ok", detail={}, engine_version=None,
                workspace_id=ws,
                data_as_of=None,
            )  # fmt: skip
    fire(db, ws, action.id, "approve", actor="ana@example.com")
    with db.write() as conn:
        other = bootstrap(conn, name="Other Co")["workspace_id"]
        with pytest.raises(NotFound):
            repo.record_evaluation(
                conn, action_id=action.id, kind="monitor", outcome="ok", detail={}, engine_version=None,
                data_as_of=None, workspace_id=other,
            )  # fmt: skip
    with db.read() as conn:
        steps = repo.history(conn, workspace_id=ws, action_id=action.id)
        assert repo.history(conn, workspace_id=other, action_id=action.id) == []
    labels = [s.trigger if isinstance(s, repo.TransitionRecord) else s.kind for s in steps]
    assert labels == ["create", "proposal", "revalidation", "approve"]
    assert steps[1] == proposal and proposal.detail == {"n": [300, 310]}
    assert proposal.data_as_of == T0 - timedelta(hours=2)


def test_policy_defaults_until_changed_then_stored_audited_and_validated(db: Database, workspace: dict) -> None:
    ws = workspace["workspace_id"]
    with db.read() as conn:
        stored = policies.read_policy(conn, workspace_id=ws)
    assert stored.policy == DEFAULT and stored.is_default and stored.updated_by is None
    assert (DEFAULT.target_payback_days, DEFAULT.p_decision, DEFAULT.max_leg_change) == (180, 0.95, 0.2)

    with db.write() as conn:
        changed = policies.change_policy(
            conn, workspace_id=ws, changes={"max_leg_change": 0.15, "auto_rollback": False}, actor="ana", at=T0
        )
    with db.read() as conn:
        again = policies.read_policy(conn, workspace_id=ws)
        trail = [e for e in audit.entries(conn, workspace_id=ws) if e["action"] == "action_policy.changed"]
    assert again == changed and again.updated_by == "ana" and again.updated_at == T0
    assert (again.policy.max_leg_change, again.policy.auto_rollback, again.policy.cooldown_days) == (0.15, False, 7)
    assert [e["detail"] for e in trail] == [
        {"changed": {"max_leg_change": [0.2, 0.15], "auto_rollback": [True, False]}}
    ]

    with db.write() as conn:
        policies.change_policy(conn, workspace_id=ws, changes={"cooldown_days": 3}, actor="lee")
        with pytest.raises(PolicyProblem, match=r"p_decision: must be a probability in \[0.5, 1\), got 1.5"):
            policies.change_policy(conn, workspace_id=ws, changes={"p_decision": 1.5}, actor="lee")
        with pytest.raises(PolicyProblem, match="observation_days: must be between 1 and"):
            policies.change_policy(conn, workspace_id=ws, changes={"observation_days": 0}, actor="lee")
        unchanged = policies.change_policy(conn, workspace_id=ws, changes={"cooldown_days": 3}, actor="kim")
        with pytest.raises(NotFound):
            policies.read_policy(conn, workspace_id="ws_missing")
    assert unchanged.updated_by == "lee"
    with db.read() as conn:
        final = policies.policy_for(conn, workspace_id=ws)
        assert len([e for e in audit.entries(conn, workspace_id=ws) if e["action"] == "action_policy.changed"]) == 2
    assert (final.cooldown_days, final.max_leg_change, final.p_decision) == (3, 0.15, 0.95)


def test_running_actions_are_one_workspaces_and_only_the_operator_reads_across(db: Database, workspace: dict) -> None:
    ws = workspace["workspace_id"]
    with db.write() as conn:
        other = bootstrap(conn, name="Other Co")["workspace_id"]
    mine, theirs = propose(db, ws), propose(db, other)
    for w, action in ((ws, mine), (other, theirs)):
        fire(db, w, action.id, "approve", actor="ana@example.com")
        fire(db, w, action.id, "start", actor="flokit executor", effective_at=T0)
    with db.read() as conn:
        assert [a.id for a in repo.running_actions(conn, workspace_id=ws)] == [mine.id]
        assert [a.id for a in repo.running_actions(conn, workspace_id=other)] == [theirs.id]
        assert {a.id for a in repo.running_actions_for_operator(conn)} == {mine.id, theirs.id}
