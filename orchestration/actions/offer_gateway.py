"""The executor's offer tests on FloKit's own paywall gateway: an approved `offer_test` publishes a
two-arm config of the paywall in every app of the workspace that publishes it, and the monitor
ends it (`finish_offer_test`) by publishing the control back or the winner. Which version may be
published over is `transforms.actions.steps`'s rule; the document is `transforms.actions.execution`'s.
"""

from __future__ import annotations

from datetime import datetime

from orchestration.actions.outcome import ENGINE_VERSION, EXECUTOR, Outcome, after, refuse
from transforms.actions import execution as plan
from transforms.actions import steps
from transforms.paywall import PaywallDocument
from warehouse.actions import executions as ledger
from warehouse.actions import repository as repo
from warehouse.db import Database, utcnow
from warehouse.experiments import repository as experiments
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
        experimented = [p.app_id for p in live if experiments.for_paywall(conn, p.app_id, paywall_id).any]
    if experimented and not done:
        # The gateway splits such a paywall by its experiments and ignores experiment_active, so the
        # split this test would publish would never be served (issue 35: run it as an experiment).
        return refuse(database, action, f"{', '.join(experimented)}/{paywall_id}: the paywall has experiments "
                      "(/v1/experiments), which decide its split; run the offer test as one", {}, now,
                      evaluate=True)  # fmt: skip
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
    if not done:
        with database.write() as conn:
            repo.record_evaluation(
                conn, action_id=action.id, workspace_id=action.workspace_id, kind="preflight",
                outcome="passed", engine_version=ENGINE_VERSION,
                data_as_of=None, at=now,
                detail={"summary": f"Executor preflight passed: test {params.get('treatment_offer')} against "
                        f"{params.get('control_offer')} on paywall {paywall_id} in {len(planned)} app(s), "
                        f"{plan.OFFER_TEST_SPLIT:.0%} each",
                        "apps": [p.app_id for p, _ in planned]},
            )  # fmt: skip
    for leg_no, (published, document) in enumerate(planned, start=1):
        conflict: str | None = None
        with database.write() as conn:
            row = ledger.record_intent(
                conn, action_id=action.id, workspace_id=action.workspace_id, ad_account_id=None, kind="apply",
                leg=leg_no, platform="flokit", object_type="paywall", object_id=f"{published.app_id}:{paywall_id}",
                field="paywall_config", before={"version": published.version},
                after={"version": published.version + 1, "split": plan.OFFER_TEST_SPLIT}, now=now,
            )  # fmt: skip
            if row.state == "verified":
                continue
            current = configs.live(conn, app_id=published.app_id, paywall_id=paywall_id)
            version = current.version if current else 0
            published_by = current.published_by if current is not None else None
            step = steps.offer_test_step(version, published_by, row.before["version"], row.after["version"], EXECUTOR)
            if step == "skip":
                ledger.update(conn, row.id, state="verified", response=f"version {version} already live", now=now)
                continue
            if step == "conflict":
                ledger.update(conn, row.id, state="conflict", response=f"live version {version}", now=now)
                conflict = f"{published.app_id}/{paywall_id}: version {version} was published meanwhile"
            else:
                out = configs.publish(
                    conn, app_id=published.app_id, paywall_id=paywall_id, document=document, actor=EXECUTOR
                )
                ledger.update(
                    conn, row.id, state="verified", attempted=True, now=now,
                    request={"publish": document.model_dump(mode="json")}, response=f"published version {out.version}",
                )  # fmt: skip
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


def finish_offer_test(
    database: Database, action: repo.Action, *, publish: str, now: datetime | None = None
) -> list[configs.Published]:
    """End an offer test on the gateway: publish the control back (the version before the test)
    or the winner (the treatment arm alone), as the next version of each app's paywall; ledger
    rows kind `revert`. Where the live version is no longer the test FloKit published (an operator
    published since), nothing is published for that app: a `conflict` row. The transition
    (`complete`) is the caller's (the monitor's). Idempotent: a finished leg is not published again."""
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
            current = configs.live(conn, app_id=app_id, paywall_id=paywall_id)
            if steps.offer_finish_step(current.version if current else None, row.after["version"]) == "conflict":
                ledger.update(conn, finished.id, state="conflict", now=now,
                              response=f"live version {current.version if current else None}")  # fmt: skip
                continue
            assert current is not None  # the test version is live
            if publish == "control":
                previous = configs.version(conn, app_id=app_id, paywall_id=paywall_id, version=row.before["version"])
                assert previous is not None, "a published version is never deleted"
                document = previous.document
            else:
                winner = current.document.variants[-1].model_copy(update={"traffic_weight": 1.0})
                document = PaywallDocument(experiment_active=False, variants=[winner])
            done = configs.publish(conn, app_id=app_id, paywall_id=paywall_id, document=document, actor=EXECUTOR)
            ledger.update(
                conn, finished.id, state="verified", attempted=True, now=now,
                request={"publish": publish}, response=f"published version {done.version}",
            )  # fmt: skip
            out.append(done)
    return out
