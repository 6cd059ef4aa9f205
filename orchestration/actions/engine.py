"""The engine step: per workspace, signals + registry + policy + open actions → actions (design note §5.4).

Runs after every reports publish (the daemon: `actions_engine_sensor` on the `action_signals`
materialization) and at the end of `flokit refresh`. For each workspace:

1. reads the last `SIGNAL_LOOKBACK_DAYS` cohort days of `action_signals` (lake), the ad-entity
   registry, the policy, the open actions and the recent history (rejections, ended actions);
2. re-evaluates every open `draft`/`ready` action that has parameters, through the same pure
   function that proposed it: a `revalidation` evaluation with the fresh statistics; a draft
   whose guardrails now pass moves to `ready` (`guardrails_passed`); an action whose confidence
   stayed under `revalidation.FADE_BELOW` on two consecutive evaluations, or whose subject the data no longer
   speaks about for more than `revalidation.STALE_HOURS`, is rejected by `flokit engine` (`expire`);
3. opens the new proposals (`transforms.actions.proposals.propose`: ranked, capped, suppressed
   after a human's rejection), each with its `proposal` evaluation holding the evidence.
   `repository.create_action` emits `action.created`.

Approved and running actions are left to the executor and the monitor. One transaction per
workspace, so a failure in one leaves the others' results in place.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime

import polars as pl

from transforms.actions import proposals as gen
from transforms.actions import revalidation
from transforms.actions.proposals import entities_of, evaluate
from warehouse.actions import repository as repo
from warehouse.actions.engine_inputs import evaluation_details, load, open_actions, workspace_ids_for_operator
from warehouse.db import Connection, Database, utcnow
from warehouse.lake import Lake

ACTOR = "flokit engine"


@dataclass
class EngineResult:
    workspace_id: str
    data_through: date | None
    created: list[str] = field(default_factory=list)
    revalidated: list[str] = field(default_factory=list)
    promoted: list[str] = field(default_factory=list)
    expired: list[str] = field(default_factory=list)
    skipped: str | None = None

    def summary(self) -> str:
        if self.skipped:
            return f"{self.workspace_id}: {self.skipped}"
        return (
            f"{self.workspace_id}: {len(self.created)} new, {len(self.revalidated)} re-evaluated, "
            f"{len(self.promoted)} draft -> ready, {len(self.expired)} expired (data through {self.data_through})"
        )


def run_workspace(conn: Connection, lake: Lake, workspace_id: str, now: datetime) -> EngineResult:
    loaded = load(conn, lake, workspace_id, now)
    if loaded is None:
        result = EngineResult(workspace_id, None)
        result.skipped = "no data in the lake yet"
        return result
    signals, ctx = loaded
    result = EngineResult(workspace_id, ctx.data_through)
    if signals.is_empty():
        result.skipped = "no action signals for this workspace"
        return result
    as_of_data = gen.data_as_of(ctx.data_through)
    open_rows = open_actions(conn, workspace_id)
    still_open = []
    for action in open_rows:
        if action.status not in ("draft", "ready") or not action.parameters:
            still_open.append(action)
            continue
        outcome = _revalidate(conn, signals, ctx, action, as_of_data, now, result)
        if outcome != "expired":
            still_open.append(action)
    # New proposals see the open actions as they are after the expiries.
    ctx = dataclasses.replace(
        ctx,
        open_actions=[
            gen.OpenAction(a.id, a.type, a.status, a.fingerprint, entities_of(a.type, a.parameters)) for a in still_open
        ],
    )
    for proposal in gen.propose(signals, ctx):
        try:
            action = repo.create_action(
                conn,
                workspace_id=workspace_id,
                action_type=proposal.action_type,
                content=proposal.content,
                actor=ACTOR,
                origin="engine",
                at=now,
                parameters=proposal.parameters,
                fingerprint=proposal.fingerprint,
                rollback_rules=proposal.rollback_rules,
            )
        except repo.AlreadyOpen as held:
            repo.record_evaluation(
                conn,
                action_id=held.action_id,
                workspace_id=workspace_id,
                kind="revalidation",
                outcome="passed" if proposal.guardrails_pass else "failed",
                detail=gen.evaluation_detail(proposal, f"Engine re-evaluation: {gen.confidence_line(proposal)}"),
                engine_version=gen.ENGINE_VERSION,
                data_as_of=as_of_data,
                at=now,
            )
            result.revalidated.append(held.action_id)
            continue
        repo.record_evaluation(
            conn,
            action_id=action.id,
            workspace_id=action.workspace_id,
            kind="proposal",
            outcome="proposed",
            detail=gen.evaluation_detail(proposal, f"Engine proposal: {gen.confidence_line(proposal)}"),
            engine_version=gen.ENGINE_VERSION,
            data_as_of=as_of_data,
            at=now,
        )
        result.created.append(action.id)
    return result


def _revalidate(
    conn: Connection,
    signals: pl.DataFrame,
    ctx: gen.Context,
    action: repo.Action,
    as_of_data: datetime,
    now: datetime,
    result: EngineResult,
) -> str:
    """Re-evaluate one open draft/ready action (`transforms.actions.revalidation` decides);
    returns `expired`, `promoted` or `kept`."""
    assert action.parameters is not None
    previous = evaluation_details(conn, action.id)
    evaluation = evaluate(signals, ctx, action.type, action.parameters, own_id=action.id)
    if evaluation is None:
        # Since the last evaluation that had data (or since the action was made, if none ever had).
        last_data = next((d["_data_as_of"] for d in previous if d.get("confidence") is not None), None)
        verdict = revalidation.without_data(as_of_data, last_data or action.created_at)
        detail = {"summary": "Engine re-evaluation: the data no longer covers this subject", "confidence": None}
    else:
        before = next((d.get("confidence") for d in previous), None)
        verdict = revalidation.with_data(evaluation.confidence, evaluation.guardrails_pass, action.status, before)
        detail = gen.evaluation_detail(evaluation, f"Engine re-evaluation: {gen.confidence_line(evaluation)}")
    repo.record_evaluation(
        conn,
        action_id=action.id,
        workspace_id=action.workspace_id,
        kind="revalidation",
        outcome=verdict.outcome,
        detail=detail,
        engine_version=gen.ENGINE_VERSION,
        data_as_of=as_of_data,
        at=now,
    )
    result.revalidated.append(action.id)
    if verdict.trigger is None:
        return "kept"
    repo.transition(
        conn,
        workspace_id=action.workspace_id,
        action_id=action.id,
        trigger=verdict.trigger,
        actor=ACTOR,
        note=verdict.note,
        at=now,
    )
    if verdict.trigger == "expire":
        result.expired.append(action.id)
        return "expired"
    result.promoted.append(action.id)
    return "promoted"


def run_engine(
    database: Database,
    lake: Lake,
    *,
    workspace_id: str | None = None,
    now: datetime | None = None,
    log: Callable[[str], None] = lambda _line: None,
) -> list[EngineResult]:
    """The engine over every workspace (or one); one transaction per workspace."""
    now = now or utcnow()
    with database.read() as conn:
        every = workspace_ids_for_operator(conn)
    ids = every if workspace_id is None else [ws for ws in every if ws == workspace_id]
    results = []
    for ws in ids:
        with database.write() as conn:
            result = run_workspace(conn, lake, ws, now)
        log(result.summary())
        results.append(result)
    return results
