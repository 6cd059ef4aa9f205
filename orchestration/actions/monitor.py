"""The monitor: after every refresh, each running action's rollback rules checked against the lake.

Design note §5.6, docs/actions-engine.md "The flow". For every `running` action whose change took
effect (`effective_at`), each rule is evaluated (`transforms.actions.monitoring.evaluate`) and
recorded as an `action_evaluations` row (kind `monitor`). Then:

- a breach emits `guardrail.triggered` carrying the rule, the observed value and the bound, once
  per rule and episode (when the rule's previous check was not a breach: with `auto_rollback` off
  an action that stays in breach is not re-announced every six hours);
- a breach of an `on_breach: rollback` rule under the workspace's `auto_rollback` policy moves the
  action `running → rolled_back` (actor `flokit monitor`, the note the rendered rule with the
  observed value and bound), which emits `action.rolled_back`; the executor's sensor reverts the
  platform change of every action that reaches `rolled_back`, so nothing here calls a platform.
  An offer test cannot be rolled back (a paywall test has no previous spend to restore): it is
  `completed` with the reason, and `finish_offer_test` (the executor's, when it is passed in)
  publishes the control back;
- an action whose observation window (policy `observation_days` from `effective_at`) is over, and
  no rule of which is in breach, is `completed` by `flokit monitor`.

Idempotent per materialization: a pass carries a `run_key` (the `action_signals` materialization's
storage id); an action that already has a monitor evaluation of that key is not evaluated again
(the sensor and `flokit refresh` may both see one materialization), though its window is still
checked, since time passes without new data.
"""

# No `from __future__ import annotations`: Dagster reads the op's config annotation at runtime.

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

import dagster as dg
import polars as pl

from orchestration.actions.offer_gateway import experiment_ids
from orchestration.actions.offer_gateway import finish_offer_test as publish_back
from orchestration.resources import DatabaseResource, DataDirResource
from transforms.actions.monitoring import Outcome, evaluate, observation_over
from transforms.actions.rules import RollbackRule, rules_from_dicts
from transforms.actions.verdict import (
    TestReading,
    announce,
    breach_note,
    decide,
    decide_offer_test,
    read_experiment,
    read_experiments,
)
from transforms.webhooks import payloads
from warehouse.actions import repository
from warehouse.actions.policy import policy_for
from warehouse.db import Connection, Database
from warehouse.errors import TransitionRefused
from warehouse.experiments.results import stored as stored_results
from warehouse.fx import reporting_currencies
from warehouse.lake import Lake
from warehouse.reports import report_lake
from warehouse.webhooks.outbox import emit_event

ACTOR = "flokit monitor"
GUARDRAIL = "rollback_rule"
EXPERIMENT_RULE = "experiment"  # an offer test's evaluation of its experiments' results
MONITOR_VERSION = "monitor-1"
SIGNALS_KEY = dg.AssetKey(report_lake.ACTION_SIGNALS)
# What the executor provides for offer tests (docs/actions-engine.md): publish the control (or the
# winner) back on the paywall gateway: `finish_offer_test(action, publish="control")`. Called after
# the `completed` transition has committed, whether the test was stopped by a breach or its window
# ended (the operator may later choose to publish the winner).
OfferTestFinisher = Callable[[repository.Action, str], None]


def run_key_for(storage_id: int | None) -> str:
    """One key per `action_signals` materialization (the sensor's run key, and the evaluations')."""
    return f"act-monitor-{storage_id if storage_id is not None else 'none'}"


@dataclass
class ActionCheck:
    """What one pass did to one action (printed by `flokit refresh`, asserted by the tests)."""

    action_id: str
    workspace_id: str
    outcomes: dict[str, str] = field(default_factory=dict)  # rule id → pending|inconclusive|ok|breach
    transition: str | None = None  # rollback | complete
    publish: str | None = None  # an offer test completed: what ending it publishes (control | winner)
    already_evaluated: bool = False
    webhooks: int = 0


def monitor_all(
    database: Database,
    lake: Lake,
    *,
    run_key: str,
    now: datetime | None = None,
    finish_offer_test: OfferTestFinisher | None = None,
) -> list[ActionCheck]:
    """Every workspace that has running actions, one after the other."""
    with database.read() as conn:
        workspaces = sorted({a.workspace_id for a in repository.running_actions_for_operator(conn)})
    checks: list[ActionCheck] = []
    for workspace_id in workspaces:
        checks += monitor_workspace(
            database, lake, workspace_id, run_key=run_key, now=now, finish_offer_test=finish_offer_test
        )
    return checks


def monitor_workspace(
    database: Database,
    lake: Lake,
    workspace_id: str,
    *,
    run_key: str,
    now: datetime | None = None,
    finish_offer_test: OfferTestFinisher | None = None,
) -> list[ActionCheck]:
    """Check every running action of one workspace (module docstring); one transaction per action,
    so a failure on one leaves the others' checks recorded."""
    at = now or datetime.now(UTC)
    with database.read() as conn:
        running = repository.running_actions(conn, workspace_id=workspace_id)
        currencies = reporting_currencies(conn)
    currency = dict(currencies.iter_rows()).get(workspace_id)
    signals = report_lake.scan_days(lake, report_lake.ACTION_SIGNALS).filter(pl.col("workspace_id") == workspace_id)
    spend = report_lake.scan_days(lake, report_lake.SPEND).filter(pl.col("workspace_id") == workspace_id)
    checks = []
    for action in running:
        if action.effective_at is None:
            continue  # not executed on a platform (a human's own proposal, the demo's): nothing to watch
        rules = rules_from_dicts(action.rollback_rules)
        since = _earliest_day(action.effective_at, rules)
        frame = signals.filter(pl.col("cohort_date") >= since).collect()
        spend_rows = spend.filter(pl.col("spend_date") >= since).collect()
        check = _check(database, action, rules, frame, spend_rows, at, run_key, currency)
        checks.append(check)
        if check.publish is not None and finish_offer_test is not None:
            finish_offer_test(action, check.publish)
    return checks


def _earliest_day(effective_at: datetime, rules: list[RollbackRule]) -> date:
    longest = max([r.baseline_window_days or 0 for r in rules], default=0)
    return effective_at.date() - timedelta(days=longest + 1)


def _check(
    database: Database,
    action: repository.Action,
    rules: list[RollbackRule],
    frame: pl.DataFrame,
    spend_rows: pl.DataFrame,
    now: datetime,
    run_key: str,
    currency: str | None,
) -> ActionCheck:
    check = ActionCheck(action.id, action.workspace_id)
    assert action.effective_at is not None
    with database.write() as conn:
        history = [
            e for e in repository.evaluations(conn, workspace_id=action.workspace_id, action_id=action.id)
            if e.kind == "monitor"
        ]  # fmt: skip
        mine = [e for e in history if e.detail.get("run_key") == run_key]
        breaches: list[tuple[RollbackRule, Outcome | None, dict[str, Any]]] = []
        if mine:
            check.already_evaluated = True
            for e in mine:
                check.outcomes[str(e.detail.get("rule_id"))] = e.outcome
            by_id = {r.id: r for r in rules}
            breaches = [
                (by_id[str(e.detail["rule_id"])], None, e.detail)
                for e in mine
                if e.outcome == "breach" and str(e.detail.get("rule_id")) in by_id
            ]
        else:
            for rule in rules:
                earlier = [e for e in history if e.detail.get("rule_id") == rule.id]
                outcome = evaluate(
                    rule,
                    frame,
                    spend_rows,
                    action.effective_at,
                    now,
                    parameters=action.parameters,
                    previous=[bool(e.detail.get("past_threshold")) for e in earlier],
                    reporting_currency=currency,
                )
                detail = {**outcome.to_detail(rule), "run_key": run_key}
                repository.record_evaluation(
                    conn,
                    action_id=action.id,
                    workspace_id=action.workspace_id,
                    kind="monitor",
                    outcome=outcome.status,
                    detail=detail,
                    engine_version=MONITOR_VERSION,
                    data_as_of=now,
                    at=now,
                )
                check.outcomes[rule.id] = outcome.status
                if outcome.status != "breach":
                    continue
                breaches.append((rule, outcome, detail))
                if not announce(earlier[-1].outcome if earlier else None):
                    continue  # this episode was announced at its first breach
                emit_event(
                    conn,
                    workspace_id=action.workspace_id,
                    event_type="guardrail.triggered",
                    data=payloads.guardrail_triggered(
                        guardrail=GUARDRAIL,
                        action=action.webhook_data()["action"],
                        detail=breach_note(rule, detail),
                        rule=rule.to_dict(),
                        observed=detail["observed"],
                        bound=detail["bound"],
                        threshold=detail["threshold"],
                        baseline=detail["baseline"],
                    ),
                )
                check.webhooks += 1
        policy = policy_for(conn, workspace_id=action.workspace_id)
        window_over = observation_over(action.effective_at, now, policy.observation_days)
        stated = [(r, d) for r, _o, d in breaches]
        publish: str | None = None
        if action.type == "offer_test":
            reading = _read_experiments(conn, action, run_key, now, record=not mine)
            decision, publish = decide_offer_test(stated, policy, window_over, reading)
            if reading is not None:
                check.outcomes[EXPERIMENT_RULE] = reading.outcome
        else:
            decision = decide(stated, policy, action.type, window_over)
        if decision.trigger is not None:
            try:
                repository.transition(
                    conn,
                    workspace_id=action.workspace_id,
                    action_id=action.id,
                    trigger=decision.trigger,
                    actor=ACTOR,
                    note=decision.note,
                    at=now,
                )
                check.transition = decision.trigger
                check.publish = publish
            except TransitionRefused:
                pass  # someone (an operator's rollback) moved it since it was read: their decision stands
    return check


def _read_experiments(
    conn: Connection, action: repository.Action, run_key: str, now: datetime, *, record: bool
) -> TestReading | None:
    """What the last refresh's results of an offer test's experiments say (None: a test applied
    before offer tests ran as experiments); recorded as the pass's `experiment` evaluation."""
    ids = experiment_ids(conn, action.id)
    if not ids:
        return None
    found = stored_results(conn, ids)
    reading = read_experiments(
        [read_experiment(found[i].results if i in found else None, i in found and found[i].srm_flagged) for i in ids]
    )
    if record:
        repository.record_evaluation(
            conn, action_id=action.id, workspace_id=action.workspace_id, kind="monitor", outcome=reading.outcome,
            detail={"rule_id": EXPERIMENT_RULE, "summary": reading.summary, "experiment_ids": ids,
                    "figures": reading.figures, "run_key": run_key},
            engine_version=MONITOR_VERSION, data_as_of=now, at=now,
        )  # fmt: skip
    return reading


# --------------------------------------------------------------------------------- Dagster


class MonitorConfig(dg.Config):
    run_key: str


@dg.op(description="Check every running action's rollback rules; roll back, alert or complete.")
def monitor_actions(
    context: dg.OpExecutionContext, config: MonitorConfig, database: DatabaseResource, data_dir: DataDirResource
) -> None:
    db = database.database()

    def finish(action: repository.Action, publish: str) -> None:
        publish_back(db, action, publish=publish)

    checks = monitor_all(db, data_dir.paths.lake(), run_key=config.run_key, finish_offer_test=finish)
    for c in checks:
        verdicts = ", ".join(f"{rule} {status}" for rule, status in c.outcomes.items()) or "no rules"
        context.log.info(f"{c.action_id}: {verdicts}; {c.transition or 'still running'}")


@dg.job(description="The monitor of running growth actions (requested by monitor_actions_sensor and flokit refresh).")
def monitor_actions_job() -> None:
    monitor_actions()


def monitor_run_config(run_key: str) -> dict[str, Any]:
    return {"ops": {"monitor_actions": {"config": {"run_key": run_key}}}}


@dg.sensor(
    job=monitor_actions_job,
    name="monitor_actions_sensor",
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="After each action_signals materialization, checks the running actions' rollback rules.",
)
def monitor_actions_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
    """One run per materialization, keyed by its storage id (an asset sensor does not expose it);
    materializations that land while a run is pending are covered by the next one, which reads the
    lake as it is then. The cursor is the last storage id requested."""
    after = int(context.cursor) if context.cursor else None
    records = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=SIGNALS_KEY, after_storage_id=after), limit=1
    ).records
    if not records:
        return dg.SkipReason("no new action_signals materialization")
    key = run_key_for(records[0].storage_id)
    return dg.SensorResult(
        run_requests=[dg.RunRequest(run_key=key, run_config=monitor_run_config(key))],
        cursor=str(records[0].storage_id),
    )


def latest_run_key(instance: dg.DagsterInstance) -> str:
    """The run key of the latest `action_signals` materialization (what `flokit refresh` passes)."""
    records = instance.fetch_materializations(SIGNALS_KEY, limit=1).records
    return run_key_for(records[0].storage_id if records else None)
