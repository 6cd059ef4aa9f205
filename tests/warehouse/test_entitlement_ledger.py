"""The ledger under concurrency and tenancy: racing receipts for one purchase link it once, and
a workspace never reads another's purchases."""

from __future__ import annotations

from typing import Any

from tests.entitlements_support import fact
from tests.support import run_together
from warehouse.bootstrap import bootstrap
from warehouse.db import Database
from warehouse.entitlements import ledger


def test_racing_receipts_for_one_purchase_link_it_once(db: Database, workspace: dict[str, Any]) -> None:
    purchase = fact("7000001")  # one statement of the purchase, shown by every racer

    def claim(user: str) -> Any:
        with db.write() as conn:
            return ledger.apply_receipt(
                conn, workspace_id=workspace["workspace_id"], app_id=workspace["app_id"], user_id=user, fact=purchase
            )

    results = run_together(*[lambda u=f"user-{i}": claim(u) for i in range(6)])
    linked = [r for r in results if isinstance(r, ledger.Applied)]
    refused = [r for r in results if isinstance(r, ledger.NotTheBuyer)]
    assert len(linked) == 1 and len(refused) == 5, results
    winner = linked[0].user_id
    with db.read() as conn:
        for i in range(6):
            user = f"user-{i}"
            state = ledger.current(
                conn, workspace_id=workspace["workspace_id"], app_id=workspace["app_id"], user_id=user
            )
            assert state.active is (user == winner)


def test_a_purchase_is_read_only_within_its_workspace(db: Database, workspace: dict[str, Any]) -> None:
    ws, app = workspace["workspace_id"], workspace["app_id"]
    with db.write() as conn:
        ledger.apply_receipt(conn, workspace_id=ws, app_id=app, user_id="u1", fact=fact("7000001"))
        other = bootstrap(conn, name="Other Co")["workspace_id"]
    with db.read() as conn:
        assert ledger.current(conn, workspace_id=ws, app_id=app, user_id="u1").active is True
        assert ledger.current(conn, workspace_id=other, app_id=app, user_id="u1") == ledger.Entitlement(False, "none")
