"""The executor's offer tests on FloKit's own paywall gateway. An approved `offer_test`, in every
app of the workspace that publishes the paywall and in one transaction per app, publishes the
paywall with the treatment arm added and creates and starts a real experiment (/v1/experiments)
that splits the test's country between the control and the treatment: sticky exposures, results
with chance to win and the sample-ratio check, on the Experiments page like any other. The monitor
reads those results and ends the test (`finish_offer_test`): the experiment stopped and the control
published back, or the treatment shipped. Which version may be published over is
`transforms.actions.steps`'s rule; the document and the experiment are `transforms.actions.execution`'s.
"""

from __future__ import annotations

from datetime import datetime

from orchestration.actions.outcome import ENGINE_VERSION, EXECUTOR, Outcome, after, refuse
from transforms.actions import execution as plan
from transforms.actions import steps
from transforms.experiments import audience as audiences
from transforms.experiments.model import DefinitionProblem
from transforms.paywall import PaywallDocument
from warehouse.actions import executions as ledger
from warehouse.actions import repository as repo
from warehouse.db import Connection, Database, utcnow
from warehouse.experiments import repository as experiments
from warehouse.experiments.results import stored as stored_results
from warehouse.paywalls import configs


def apply_offer_test(database: Database, action: repo.Action, now: datetime) -> Outcome:
    params = action.parameters or {}
    paywall_id = str(params.get("paywall_id", ""))
    with database.read() as conn:
        done = {r.leg: r for r in ledger.executions(conn, action_id=action.id, kind="apply")}
        live = configs.live_in_workspace(conn, workspace_id=action.workspace_id, paywall_id=paywall_id)
    if not live:
        return refuse(database, action, f"no app of the workspace publishes paywall {paywall_id!r}", {}, now,
                       evaluate=True)  # fmt: skip
    with database.read() as conn:
        busy = [
            f"{p.app_id}/{paywall_id} ({', '.join(x.id for x in found.running)})"
            for p in live
            if (found := experiments.for_paywall(conn, p.app_id, paywall_id)).running
        ]
    if busy and not done:
        # The first running experiment whose audience holds takes a user: a second one beside it
        # would get only the users the first does not want, which is not the test proposed.
        return refuse(database, action, f"the paywall runs experiments: {'; '.join(busy)}; stop them first, or run "
                      "this offer test as one of your own", {}, now, evaluate=True)  # fmt: skip
    planned: list[tuple[configs.Published, PaywallDocument]] = []
    for published in live:
        leg_no = len(planned) + 1
        if leg_no in done:
            planned.append((published, published.document))
            continue
        document = plan.offer_test_document(
            published.document,
            control=str(params.get("control_offer")),
            treatment=str(params.get("treatment_offer")),
            action_id=action.id,
        )
        if isinstance(document, str):
            return refuse(database, action, f"{published.app_id}/{paywall_id}: {document}", {}, now, evaluate=True)
        planned.append((published, document))
    design = plan.offer_test_experiment(
        params, control_variant_id=live[0].document.variants[0].variant_id, action_id=action.id
    )
    if design.audience is not None:
        try:
            audiences.parse_audience(design.audience)
        except audiences.InvalidAudience as exc:
            return refuse(database, action, f"the test's audience: {exc.field}: {exc.message}", {}, now, evaluate=True)
    if not done:
        with database.write() as conn:
            repo.record_evaluation(
                conn, action_id=action.id, workspace_id=action.workspace_id, kind="preflight",
                outcome="passed", engine_version=ENGINE_VERSION,
                data_as_of=None, at=now,
                detail={"summary": f"Executor preflight passed: test {params.get('treatment_offer')} against "
                        f"{params.get('control_offer')} on paywall {paywall_id} in {len(planned)} app(s), "
                        f"{plan.OFFER_TEST_SPLIT:.0%} each, as an experiment: {design.name}",
                        "apps": [p.app_id for p, _ in planned]},
            )  # fmt: skip
    for leg_no, (published, document) in enumerate(planned, start=1):
        conflict: str | None = None
        try:
            conflict = _apply_leg(database, action, leg_no, published, document, now)
        except _Refused as exc:  # nothing of the leg was committed
            conflict = str(exc)
        if conflict is not None:
            return refuse(database, action, conflict, {}, now, evaluate=True)
    done_at = after(now)
    effective = done_at + plan.PROPAGATION[("flokit", "paywall_config")]
    with database.write() as conn:
        repo.transition(
            conn, workspace_id=action.workspace_id, action_id=action.id, trigger="start", actor=EXECUTOR, at=done_at,
            note=f"published the test config of paywall {paywall_id} in {len(planned)} app(s)", effective_at=effective,
        )  # fmt: skip
    return Outcome(action.id, "apply", "running", f"paywall {paywall_id} test published", writes=len(planned))


def _apply_leg(
    database: Database,
    action: repo.Action,
    leg_no: int,
    published: configs.Published,
    document: PaywallDocument,
    now: datetime,
) -> str | None:
    """One app's leg, in one transaction: the test's document published and its experiment
    started, or neither. Returns why the leg cannot be applied (an operator published meanwhile)."""
    paywall_id = published.paywall_id
    with database.write() as conn:
        row = ledger.record_intent(
            conn, action_id=action.id, workspace_id=action.workspace_id, ad_account_id=None, kind="apply",
            leg=leg_no, platform="flokit", object_type="paywall", object_id=f"{published.app_id}:{paywall_id}",
            field="paywall_config", before={"version": published.version},
            after={"version": published.version + 1, "split": plan.OFFER_TEST_SPLIT}, now=now,
        )  # fmt: skip
        if row.state == "verified":
            return None
        current = configs.live(conn, app_id=published.app_id, paywall_id=paywall_id)
        version = current.version if current else 0
        published_by = current.published_by if current is not None else None
        step = steps.offer_test_step(version, published_by, row.before["version"], row.after["version"], EXECUTOR)
        if step == "skip":
            ledger.update(conn, row.id, state="verified", response=f"version {version} already live", now=now)
            return None
        if step == "conflict":
            ledger.update(conn, row.id, state="conflict", response=f"live version {version}", now=now)
            return f"{published.app_id}/{paywall_id}: version {version} was published meanwhile"
        out = configs.publish(conn, app_id=published.app_id, paywall_id=paywall_id, document=document, actor=EXECUTOR)
        design = plan.offer_test_experiment(  # the control: the variant everyone in this app sees now
            action.parameters or {}, control_variant_id=published.document.variants[0].variant_id, action_id=action.id
        )
        experiment = _start_experiment(conn, action, published.app_id, paywall_id, design)
        ledger.update(
            conn, row.id, state="verified", attempted=True, now=now,
            request={"publish": document.model_dump(mode="json"), "experiment_id": experiment.id},
            response=f"published version {out.version}; started experiment {experiment.id}",
        )  # fmt: skip
    return None


def _start_experiment(
    conn: Connection, action: repo.Action, app_id: str, paywall_id: str, design: plan.OfferTestExperiment
) -> experiments.Experiment:
    """The test's experiment on one app's paywall, created and started (its `experiment.started`
    event goes out with the transaction). A definition the rules refuse raises `_Refused`, which
    rolls the leg's transaction back: its document is not published either."""
    try:
        made = experiments.create(
            conn, workspace_id=action.workspace_id, app_id=app_id, paywall_id=paywall_id, name=design.name,
            variants=design.variants, holdout_pct=0.0, primary_metric=design.primary_metric,
            audience=design.audience, priority=0, actor=EXECUTOR,
        )  # fmt: skip
        return experiments.transition(conn, action.workspace_id, made.id, "start", actor=EXECUTOR)
    except DefinitionProblem as exc:
        raise _Refused(f"{app_id}/{paywall_id}: the experiment: {exc.field}: {exc.message}") from None


class _Refused(Exception):
    """Ends an offer test leg's transaction without committing what it wrote."""


def experiment_ids(conn: Connection, action_id: str) -> list[str]:
    """The experiments an offer test started (one per app), from its applied legs."""
    rows = ledger.executions(conn, action_id=action_id, kind="apply")
    found = [(r.last_request or {}).get("experiment_id") for r in rows if r.state == "verified"]
    return [str(x) for x in found if x]


def finish_offer_test(
    database: Database, action: repo.Action, *, publish: str, now: datetime | None = None
) -> list[configs.Published]:
    """End an offer test on the gateway. Its experiment is stopped, and the control (the version
    before the test) published back, or the winner shipped: the treatment first and everyone's
    default (`experiments.ship`, audited with the results it stood on). As the next version of
    each app's paywall; ledger rows kind `revert`. Where the live version is no longer the test
    FloKit published (an operator published since), nothing is published for that app: a
    `conflict` row. The transition (`complete`) is the caller's (the monitor's). Idempotent: a
    finished leg is not published again."""
    if publish not in ("control", "winner"):
        raise ValueError("publish must be 'control' or 'winner'")
    now = now or utcnow()
    paywall_id = str((action.parameters or {}).get("paywall_id", ""))
    out: list[configs.Published] = []
    with database.write() as conn:
        applied = [r for r in ledger.executions(conn, action_id=action.id, kind="apply") if r.state == "verified"]
        for row in applied:
            app_id = row.object_id.split(":", 1)[0]
            finished = ledger.record_intent(
                conn, action_id=action.id, workspace_id=action.workspace_id, ad_account_id=None, kind="revert",
                leg=row.leg, platform="flokit", object_type="paywall", object_id=row.object_id,
                field="paywall_config", before=row.after, after={"publish": publish}, now=now,
            )  # fmt: skip
            if finished.state != "intent":
                continue
            experiment_id = (row.last_request or {}).get("experiment_id")
            experiment = _still_running(conn, action.workspace_id, experiment_id)
            current = configs.live(conn, app_id=app_id, paywall_id=paywall_id)
            if steps.offer_finish_step(current.version if current else None, row.after["version"]) == "conflict":
                if experiment is not None:  # the test ends with the action, whoever published since
                    experiments.transition(conn, action.workspace_id, experiment.id, "stop", actor=EXECUTOR)
                ledger.update(conn, finished.id, state="conflict", now=now,
                              response=f"live version {current.version if current else None}")  # fmt: skip
                continue
            assert current is not None  # the test version is live
            if publish == "winner" and experiment is not None:
                evidence = stored_results(conn, [experiment.id]).get(experiment.id)
                _, done = experiments.ship(
                    conn, action.workspace_id, experiment.id, experiment.variants[-1].variant_id, actor=EXECUTOR,
                    evidence=evidence.results if evidence is not None else {},
                )  # fmt: skip
            else:
                if experiment is not None:
                    experiments.transition(conn, action.workspace_id, experiment.id, "stop", actor=EXECUTOR)
                if publish == "control":
                    previous = configs.version(
                        conn, app_id=app_id, paywall_id=paywall_id, version=row.before["version"]
                    )
                    assert previous is not None, "a published version is never deleted"
                    document = previous.document
                else:  # the treatment is the last variant of the test's document
                    winner = current.document.variants[-1].model_copy(update={"traffic_weight": 1.0})
                    others = list(current.document.variants[:-1]) if experiment_id else []  # legacy: alone
                    document = PaywallDocument(experiment_active=False, variants=[winner, *others])
                done = configs.publish(conn, app_id=app_id, paywall_id=paywall_id, document=document, actor=EXECUTOR)
            ledger.update(
                conn, finished.id, state="verified", attempted=True, now=now,
                request={"publish": publish}, response=f"published version {done.version}",
            )  # fmt: skip
            out.append(done)
    return out


def _still_running(conn: Connection, workspace_id: str, experiment_id: str | None) -> experiments.Experiment | None:
    if not experiment_id:
        return None  # a test applied before offer tests ran as experiments (an experiment_active split)
    found = experiments.get(conn, workspace_id, experiment_id)
    return found if found.status == "running" else None
