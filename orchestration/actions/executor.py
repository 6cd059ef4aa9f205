"""The executor: an approved action applied on its ad platform, and a rolled-back one reverted
(offer tests on FloKit's own paywall gateway are `offer_gateway`'s; each leg's step, apply, skip
or conflict, is `transforms.actions.steps`'s).
Run by the job `execute_action_job` (orchestration/actions/jobs.py), one run per approval and
per rollback (the sensor `execute_action_sensor`).

Apply (`kind=apply`), docs/actions-engine.md "Executor":
1. plan (`transforms.actions.execution`): the legs from the parameters, the registry and the
   policy; a plan that cannot be made (nothing mapped, ambiguous, stale registry, over the
   policy) is refused;
2. preflight: every leg's object is re-read on the platform; a live value other than the
   registry's (someone edited it since the engine read it) refuses the action;
3. the legs in order (decreases first), each `intent` → write (absolute) → `sent` → read back
   → `verified`; a leg that fails for good (after the client's retries) or finds a value that is
   neither `before` nor `after` compensates the verified legs (their `before` written back) and
   abandons the action; all verified → `start` (approved → running) with `effective_at` = now
   plus the platform's propagation delay.
A refusal is an `action_evaluations` row (kind `preflight`, outcome `refused`) and the `abandon`
transition (approved → rejected, actor `flokit executor`) with the reason as its note.

A re-run (a crash between steps) continues from the ledger: a leg already `verified` is left, a
live value already equal to `after` is marked verified without writing, one equal to `before` is
written, anything else is a conflict. The platform is never called inside a database transaction.

Revert (`kind=revert`): each verified apply leg gets its `before` back ONLY if the live value is
still the `after` FloKit set; otherwise a `conflict` row and `guardrail.triggered`, and the value
is left as the operator set it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from clients.ad_platform import AdPlatformClient, Retrier
from orchestration.actions.offer_gateway import apply_offer_test, finish_offer_test
from orchestration.actions.outcome import ENGINE_VERSION, EXECUTOR, Outcome, after, refuse
from orchestration.adaccounts.sync import client_for
from transforms.actions import execution as plan
from transforms.actions import steps
from transforms.actions.execution import Leg, Plan, Refusal, RegistryObject
from transforms.client_errors import AuthFailed, ClientError
from transforms.webhooks import payloads
from warehouse.actions import executions as ledger
from warehouse.actions import repository as repo
from warehouse.actions.policy import policy_for
from warehouse.adaccounts import repository as accounts
from warehouse.db import Database, utcnow
from warehouse.lake import Lake
from warehouse.webhooks.outbox import emit_event

# The guardrail name `guardrail.triggered` carries when a revert finds an operator's value.
REVERT_CONFLICT = "revert_conflict"
ClientFactory = Callable[..., AdPlatformClient]


class _Clients:
    """One client per ad account, built on first use (credentials unsealed once per run)."""

    def __init__(
        self,
        database: Database,
        lake: Lake,
        instance_key: str,
        now: datetime,
        retrier: Retrier | None,
        factory: ClientFactory,
    ) -> None:
        self.database, self.lake, self.instance_key, self.now = database, lake, instance_key, now
        self.retrier, self.factory = retrier, factory
        self._built: dict[str, AdPlatformClient] = {}

    def get(self, ad_account_id: str) -> AdPlatformClient:
        if ad_account_id not in self._built:
            with self.database.read() as conn:
                account = accounts.get_account_for_operator(conn, ad_account_id=ad_account_id)
                config = accounts.config_of(conn, ad_account_id=ad_account_id, instance_key=self.instance_key)
            self._built[ad_account_id] = self.factory(
                self.database, self.lake, account, config, now=self.now, retrier=self.retrier or Retrier()
            )
        return self._built[ad_account_id]


def _registry(database: Database, workspace_id: str) -> list[RegistryObject]:
    with database.read() as conn:
        rows = accounts.workspace_entities(conn, workspace_id=workspace_id)
    return [
        RegistryObject(a.id, a.platform, a.currency, e.as_platform(), e.synced_at, e.removed_at is not None)
        for a, e in rows
    ]


def _live(client: AdPlatformClient, leg: Leg | ledger.Execution, parent: str | None) -> Any:
    entity = client.read(leg.object_type, leg.object_id, parent)
    return entity.daily_budget if leg.field == "daily_budget" else entity.status


def _write(
    client: AdPlatformClient, leg: Leg | ledger.Execution, value: Any, parent: str | None, currency: str
) -> None:
    if leg.field == "daily_budget":
        client.set_daily_budget(leg.object_type, leg.object_id, int(value), currency, parent)
    else:
        client.set_status(leg.object_type, leg.object_id, value, parent)


def _request(leg: Leg | ledger.Execution, value: Any, currency: str | None) -> dict[str, Any]:
    call = "set_daily_budget" if leg.field == "daily_budget" else "set_status"
    return {"call": call, "object_type": leg.object_type, "object_id": leg.object_id, "value": value,
            "currency": currency}  # fmt: skip


def _parent_and_currency(database: Database, row: ledger.Execution) -> tuple[str | None, str]:
    with database.read() as conn:
        entity = accounts.get_entity(
            conn, ad_account_id=str(row.ad_account_id), entity_type=row.object_type, external_id=row.object_id
        )
        account = accounts.get_account_for_operator(conn, ad_account_id=str(row.ad_account_id))
    return entity.parent_external_id, (entity.currency or account.currency or "")


def _auth_failed(database: Database, ad_account_id: str | None, error: ClientError, now: datetime) -> None:
    """A refusal of the credentials: the account to `error` and `integration.error` (once), as a
    sync's refusal does (`warehouse.adaccounts.repository.finish_sync_failure`)."""
    if ad_account_id is None or not isinstance(
        error, AuthFailed
    ):  # a refused config is the request's, not the account's
        return
    with database.write() as conn:
        accounts.finish_sync_failure(
            conn, ad_account_id=ad_account_id, message=error.message, refused=True, error_code=error.code, now=now
        )


def execute(
    database: Database,
    lake: Lake,
    instance_key: str,
    *,
    action_id: str,
    kind: str,
    now: datetime | None = None,
    retrier: Retrier | None = None,
    client_factory: ClientFactory = client_for,
    log: Callable[[str], None] = lambda _line: None,
) -> Outcome:
    """Apply or revert one action (the job's body)."""
    now = now or utcnow()
    with database.read() as conn:
        action = repo.get_action(conn, workspace_id=ledger.workspace_of(conn, action_id=action_id), action_id=action_id)
    clients = _Clients(database, lake, instance_key, now, retrier, client_factory)
    if kind == "apply":
        outcome = _apply(database, clients, action, now)
    elif kind == "revert":
        outcome = _revert(database, clients, action, now)
    else:
        raise ValueError(f"unknown execution kind {kind!r}; expected apply or revert")
    log(f"action {action_id} {kind}: {outcome.result}: {outcome.message}")
    return outcome


# --- apply ----------------------------------------------------------------------------------


def _apply(database: Database, clients: _Clients, action: repo.Action, now: datetime) -> Outcome:
    refusal = steps.not_runnable("apply", action.status)
    if refusal is not None:
        return Outcome(action.id, "apply", "skipped", refusal)
    if not action.parameters:
        with database.write() as conn:
            repo.record_evaluation(
                conn, action_id=action.id, workspace_id=action.workspace_id, kind="preflight",
                outcome="pending", engine_version=ENGINE_VERSION,
                data_as_of=None, at=now,
                detail={"summary": "Nothing FloKit can apply: this action has no parameters; carry it out yourself."},
            )  # fmt: skip
        return Outcome(action.id, "apply", "nothing_to_apply", "no parameters: left approved for the operator")
    if action.type == "offer_test":
        return apply_offer_test(database, action, now)
    with database.read() as conn:
        done = ledger.executions(conn, action_id=action.id, kind="apply")
        policy = policy_for(conn, workspace_id=action.workspace_id)
    objects = _registry(database, action.workspace_id)
    if done:
        # A re-run: the ledger, not a new plan, says what the first run set out to do.
        legs = tuple(_leg_of(database, row) for row in done)
    else:
        made: Plan | Refusal
        if action.type == "budget_shift":
            made = plan.plan_budget_shift(action.parameters, objects, policy, now=now)
        else:
            made = plan.plan_creative_pause(action.parameters, objects, now=now)
        if isinstance(made, Refusal):
            return refuse(database, action, made.reason, made.checks, now, evaluate=True)
        legs = made.legs
        refused = _preflight(database, clients, action, legs, made, now)
        if refused is not None:
            return refused
        # Every leg's intent before the first call: a crash anywhere leaves the whole plan in the
        # ledger, and the re-run carries it out rather than a new plan.
        with database.write() as conn:
            for leg in legs:
                _intent(conn, action, "apply", leg, now)
    return _run_legs(database, clients, action, legs, now)


def _leg_of(database: Database, row: ledger.Execution) -> Leg:
    parent, currency = _parent_and_currency(database, row) if row.ad_account_id else (None, "")
    return Leg(row.leg, row.ad_account_id, row.platform, row.object_type, row.object_id, parent, row.field,
               row.before, row.after, currency or None)  # fmt: skip


def _preflight(
    database: Database, clients: _Clients, action: repo.Action, legs: tuple[Leg, ...], made: Plan, now: datetime
) -> Outcome | None:
    """Re-read every object; refuse when one differs from the registry's value."""
    live: list[dict[str, Any]] = []
    for leg in legs:
        assert leg.ad_account_id is not None
        try:
            value = _live(clients.get(leg.ad_account_id), leg, leg.parent_id)
        except ClientError as error:
            _auth_failed(database, leg.ad_account_id, error, now)
            reason = (
                f"reading {leg.object_type} {leg.object_id} on {leg.platform} failed: {error.code}: {error.message}"
            )
            return refuse(database, action, reason, made.checks, now, evaluate=True)
        live.append({"leg": leg.leg, "object": f"{leg.object_type} {leg.object_id}", "registry": leg.before,
                     "live": value, "target": leg.after})  # fmt: skip
        refusal = steps.preflight_refusal(leg, value)
        if refusal is not None:
            return refuse(database, action, refusal, {**made.checks, "legs": live}, now, evaluate=True)
    with database.write() as conn:
        repo.record_evaluation(
            conn, action_id=action.id, workspace_id=action.workspace_id, kind="preflight",
            outcome="passed", engine_version=ENGINE_VERSION,
            data_as_of=None, at=now,
            detail={**made.checks, "legs": live, "summary": f"Executor preflight passed: {made.summary}"},
        )  # fmt: skip
    return None


def _intent(conn: Any, action: repo.Action, kind: str, leg: Leg, now: datetime) -> ledger.Execution:
    return ledger.record_intent(
        conn, action_id=action.id, workspace_id=action.workspace_id, ad_account_id=leg.ad_account_id, kind=kind,
        leg=leg.leg, platform=leg.platform, object_type=leg.object_type, object_id=leg.object_id, field=leg.field,
        before=leg.before, after=leg.after, now=now,
    )  # fmt: skip


def _run_legs(
    database: Database, clients: _Clients, action: repo.Action, legs: tuple[Leg, ...], now: datetime
) -> Outcome:
    writes = 0
    verified: list[tuple[Leg, ledger.Execution]] = []
    for leg in legs:
        assert leg.ad_account_id is not None
        client = clients.get(leg.ad_account_id)
        with database.write() as conn:
            row = _intent(conn, action, "apply", leg, now)
        if row.state == "verified":
            verified.append((leg, row))
            continue
        try:
            live = _live(client, leg, leg.parent_id)
            step = steps.leg_step(live, row.before, row.after)
            if step == "skip":
                _mark(database, row.id, "verified", now, response="the live value already equals the target")
            elif step == "apply":
                _mark(database, row.id, "sent", now, attempted=True, request=_request(leg, row.after, leg.currency))
                _write(client, leg, row.after, leg.parent_id, leg.currency or "")
                writes += 1
                back = _live(client, leg, leg.parent_id)
                if not steps.written(back, row.after):
                    _mark(database, row.id, "failed", now, response=f"read back {back}, expected {row.after}")
                    return _give_up(database, clients, action, verified, f"leg {leg.leg}: read back {back}", now)
                _mark(database, row.id, "verified", now, response=f"read back {back}")
            else:
                _mark(database, row.id, "conflict", now, response=f"live {live}: neither before nor after")
                reason = steps.apply_conflict(leg, live, row.before, row.after)
                return _give_up(database, clients, action, verified, reason, now)
        except ClientError as error:
            _auth_failed(database, leg.ad_account_id, error, now)
            _mark(
                database, row.id, "failed", now, response_code=error.status, response=f"{error.code}: {error.message}"
            )
            reason = (
                f"leg {leg.leg} ({leg.label or leg.object_id}) failed on {leg.platform}: {error.code}: {error.message}"
            )
            return _give_up(database, clients, action, verified, reason, now)
        verified.append((leg, row))
    done_at = after(now)
    effective = done_at + plan.propagation(legs)
    with database.write() as conn:
        for leg, _row in verified:
            _follow(conn, leg, leg.after, now)
        note = f"applied {len(legs)} leg(s) on {', '.join(sorted({leg.platform for leg in legs}))}; effective at " + (
            effective.isoformat()
        )
        repo.transition(
            conn, workspace_id=action.workspace_id, action_id=action.id, trigger="start", actor=EXECUTOR, note=note,
            at=done_at, effective_at=effective,
        )  # fmt: skip
    return Outcome(action.id, "apply", "running", note, writes=writes)


def _follow(conn: Any, leg: Leg, value: Any, now: datetime) -> None:
    """The registry follows a value read back from the platform, so the next preflight compares
    with what is live (the sandbox's client already wrote its registry row)."""
    if leg.platform in ("sandbox", "flokit") or leg.ad_account_id is None:
        return
    accounts.set_live_state(
        conn, ad_account_id=leg.ad_account_id, entity_type=leg.object_type, external_id=leg.object_id,
        daily_budget=value if leg.field == "daily_budget" else None,
        status=value if leg.field == "status" else None, now=now,
    )  # fmt: skip


def _mark(
    database: Database,
    execution_id: int,
    state: str,
    now: datetime,
    *,
    attempted: bool = False,
    request: Any = None,
    response_code: int | None = None,
    response: str | None = None,
) -> None:
    with database.write() as conn:
        ledger.update(
            conn, execution_id, state=state, attempted=attempted, request=request, response_code=response_code,
            response=response, now=now,
        )  # fmt: skip


def _give_up(
    database: Database,
    clients: _Clients,
    action: repo.Action,
    verified: list[tuple[Leg, ledger.Execution]],
    reason: str,
    now: datetime,
) -> Outcome:
    """Compensate the verified legs, latest first (their `before` written back where the live
    value is still FloKit's), then abandon the action with the reason."""
    notes: list[str] = []
    for leg, row in reversed(verified):
        assert leg.ad_account_id is not None
        client = clients.get(leg.ad_account_id)
        try:
            live = _live(client, leg, leg.parent_id)
            if steps.compensation_step(live, row.after) == "conflict":
                notes.append(f"leg {leg.leg} not compensated: its live value {live} is no longer FloKit's {row.after}")
                continue
            _write(client, leg, row.before, leg.parent_id, leg.currency or "")
            back = _live(client, leg, leg.parent_id)
            _mark(database, row.id, "compensated", now, attempted=True, request=_request(leg, row.before, leg.currency),
                  response=f"read back {back}")  # fmt: skip
            notes.append(f"leg {leg.leg} compensated ({row.after} → {back})")
            with database.write() as conn:
                _follow(conn, leg, back, now)
        except ClientError as error:
            notes.append(f"leg {leg.leg} not compensated: {error.code}: {error.message}")
    full = reason + ("; " + "; ".join(notes) if notes else "")
    return refuse(database, action, full, {"compensation": notes}, now, evaluate=False)


# --- revert ---------------------------------------------------------------------------------


def _revert(database: Database, clients: _Clients, action: repo.Action, now: datetime) -> Outcome:
    refusal = steps.not_runnable("revert", action.status)
    if refusal is not None:
        return Outcome(action.id, "revert", "skipped", refusal)
    with database.read() as conn:
        applied = [r for r in ledger.executions(conn, action_id=action.id, kind="apply") if r.state == "verified"]
    if not applied:
        return Outcome(action.id, "revert", "skipped", "no verified platform change to revert")
    by_key = {(r.object_type, r.object_id): r for r in applied}
    legs = plan.reverted([_leg_of(database, r) for r in applied])
    writes, conflicts, failed = 0, [], []
    for leg in legs:
        source = by_key[(leg.object_type, leg.object_id)]  # its after is leg.before, its before leg.after
        assert leg.ad_account_id is not None
        with database.write() as conn:
            row = _intent(conn, action, "revert", leg, now)
        if row.state in ("verified", "conflict"):
            continue
        client = clients.get(leg.ad_account_id)
        try:
            live = _live(client, leg, leg.parent_id)
            step = steps.leg_step(live, source.after, row.after)  # source.after: what FloKit set
            if step == "skip":
                _mark(database, row.id, "verified", now, response="the live value is already the one before")
            elif step == "apply":
                _mark(database, row.id, "sent", now, attempted=True, request=_request(leg, row.after, leg.currency))
                _write(client, leg, row.after, leg.parent_id, leg.currency or "")
                writes += 1
                back = _live(client, leg, leg.parent_id)
                ok = steps.written(back, row.after)
                _mark(database, row.id, "verified" if ok else "failed", now, response=f"read back {back}")
                if not ok:
                    failed.append(leg.leg)
                with database.write() as conn:
                    _follow(conn, leg, back, now)
            else:
                conflicts.append(leg.leg)
                _conflict(database, action, row, leg, live, now)
        except ClientError as error:
            _auth_failed(database, leg.ad_account_id, error, now)
            _mark(
                database, row.id, "failed", now, response_code=error.status, response=f"{error.code}: {error.message}"
            )
            failed.append(leg.leg)
    result = steps.revert_result(failed, conflicts)
    if result == "incomplete":
        # The rollback is recorded but the platform still carries FloKit's change on these legs: the
        # job fails the run on this result, so `execute_action_failure_sensor` asks again (the ledger skips
        # the legs already done) rather than the revert ending quietly half done.
        message = f"{writes} write(s); legs {failed} failed, to be retried; conflicts on legs {conflicts}"
        return Outcome(action.id, "revert", "incomplete", message, writes, conflicts)
    return Outcome(action.id, "revert", result, f"{writes} write(s), conflicts on legs {conflicts}", writes, conflicts)


def _conflict(
    database: Database, action: repo.Action, row: ledger.Execution, leg: Leg, live: Any, now: datetime
) -> None:
    detail = steps.revert_conflict(leg, live)
    with database.write() as conn:
        ledger.update(conn, row.id, state="conflict", response=f"live {live}", now=now)
        current = repo.get_action(conn, workspace_id=action.workspace_id, action_id=action.id)
        emit_event(
            conn,
            workspace_id=action.workspace_id,
            event_type="guardrail.triggered",
            data=payloads.guardrail_triggered(
                guardrail=REVERT_CONFLICT, action=current.webhook_data()["action"], detail=detail
            ),
            now=now,
        )


__all__ = ["EXECUTOR", "Outcome", "execute", "finish_offer_test"]
