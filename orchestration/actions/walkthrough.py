"""The demo walkthrough: the engine's demo queue worked as an operator trying the flow would, on
the workspace's `sandbox` ad account only, so `make up` shows every later status for real.

- the first ready budget shift is approved and executed (the sandbox applies it to FloKit's own
  records): `running`, with the executor's ledger in its history;
- the first ready creative pause is approved, executed, then rolled back by hand, which runs the
  executor's revert: `rolled_back`;
- the first open (ready, else draft) offer test is rejected with a reason saying why: `rejected`
  (approving it would publish a new version of the demo's paywall, which the README's paywall
  examples read; a person may reject a draft as well as a ready proposal).

Every transition is the state machine's, by the labelled actor `DEMO_OPERATOR`, with a note that
says it was the walkthrough; every write is the executor's, through its ledger. Nothing is drawn
or made up: an action the engine did not propose (for a run: `ready`) is skipped, and the step says so. The
walkthrough refuses to run in a workspace with any other live ad account than a sandbox, so it
can never write to a real ad platform.

Run once by `flokit up` when it creates the demo workspace (after a first refresh), and by
`flokit demo walkthrough`. The daemon's executor sensor later sees these transitions too; the
executor continues from its ledger, so nothing is written twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from orchestration.actions.executor import Outcome, execute
from warehouse.actions import repository as repo
from warehouse.adaccounts.repository import live_accounts
from warehouse.db import Database
from warehouse.lake import Lake

DEMO_OPERATOR = "demo operator (sandbox walkthrough)"
APPROVE_NOTE = "Approved in the demo walkthrough; the sandbox ad account applies it to FloKit's own records."
ROLLBACK_NOTE = "Rolled back in the demo walkthrough to show the revert; the sandbox restores the previous values."
REJECT_REASON = (
    "Rejected in the demo walkthrough to show a rejection (approving would publish a new version of the "
    "demo paywall); the engine will not propose it again during the suppression period."
)


TYPES = ("budget_shift", "creative_pause", "offer_test")


class WalkthroughRefused(Exception):
    """The workspace has a live ad account that is not a sandbox."""


@dataclass(frozen=True)
class Step:
    action_type: str
    action_id: str | None
    status: str | None  # the action's status after the step; None when skipped
    detail: str


def walk(database: Database, lake: Lake, instance_key: str, workspace_id: str) -> list[Step]:
    with database.read() as conn:
        real = [a for a in live_accounts(conn, workspace_id=workspace_id) if a.platform != "sandbox"]
        ready, _ = repo.list_actions(conn, workspace_id=workspace_id, status="ready", limit=100)
        drafts, _ = repo.list_actions(conn, workspace_id=workspace_id, status="draft", limit=100)
    if real:
        names = ", ".join(f"{a.id} ({a.platform})" for a in real)
        raise WalkthroughRefused(f"the walkthrough runs only on sandbox ad accounts; {workspace_id} also has {names}")
    # The oldest ready action of each type (the list is newest first).
    first = {t: next((a for a in reversed(ready) if a.type == t), None) for t in TYPES}
    draft_test = next((a for a in reversed(drafts) if a.type == "offer_test"), None)
    return [
        _run(database, lake, instance_key, first["budget_shift"], "budget_shift", roll_back=False),
        _run(database, lake, instance_key, first["creative_pause"], "creative_pause", roll_back=True),
        _reject(database, first["offer_test"] or draft_test),
    ]


def _skipped(action_type: str) -> Step:
    return Step(action_type, None, None, f"no ready {action_type} in the queue")


def _fire(database: Database, action: repo.Action, trigger: str, note: str) -> None:
    with database.write() as conn:
        repo.transition(
            conn, workspace_id=action.workspace_id, action_id=action.id, trigger=trigger, actor=DEMO_OPERATOR, note=note
        )


def _run(
    database: Database, lake: Lake, key: str, action: repo.Action | None, action_type: str, *, roll_back: bool
) -> Step:
    if action is None:
        return _skipped(action_type)
    _fire(database, action, "approve", APPROVE_NOTE)
    applied = execute(database, lake, key, action_id=action.id, kind="apply", now=datetime.now(UTC))
    if applied.result != "running" or not roll_back:
        return _step(database, action, applied)
    _fire(database, action, "rollback", ROLLBACK_NOTE)
    reverted = execute(database, lake, key, action_id=action.id, kind="revert", now=datetime.now(UTC))
    return _step(database, action, reverted)


def _reject(database: Database, action: repo.Action | None) -> Step:
    if action is None:
        return Step("offer_test", None, None, "no open offer_test in the queue")
    _fire(database, action, "reject", REJECT_REASON)
    return Step(action.type, action.id, "rejected", REJECT_REASON)


def _step(database: Database, action: repo.Action, outcome: Outcome) -> Step:
    with database.read() as conn:
        status = repo.get_action(conn, workspace_id=action.workspace_id, action_id=action.id).status
    return Step(action.type, action.id, status, f"{outcome.kind}: {outcome.result}, {outcome.message}")
