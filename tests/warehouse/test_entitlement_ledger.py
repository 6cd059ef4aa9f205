"""The ledger under concurrency and tenancy: racing receipts for one purchase link it once, and
a workspace never reads another's purchases; a statement dated in the future never outranks the
genuine ones after it."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.support import run_together
from tests.support.entitlements import fact
from transforms.entitlements.facts import SOURCES, StoreFact
from warehouse.bootstrap import bootstrap
from warehouse.db import Database
from warehouse.entitlements import ledger
from warehouse.errors import NotTheBuyer


def test_racing_receipts_for_one_purchase_link_it_once(db: Database, workspace: dict[str, Any]) -> None:
    purchase = fact("7000001")  # one statement of the purchase, shown by every racer

    def claim(user: str) -> Any:
        with db.write() as conn:
            return ledger.apply_receipt(
                conn, workspace_id=workspace["workspace_id"], app_id=workspace["app_id"], user_id=user, fact=purchase
            )

    results = run_together(*[lambda u=f"user-{i}": claim(u) for i in range(6)])
    linked = [r for r in results if isinstance(r, ledger.Applied)]
    refused = [r for r in results if isinstance(r, NotTheBuyer)]
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


def play_fact(token: str, stated_at: datetime, expires_at: datetime | None = None, **kwargs: Any) -> StoreFact:
    """Google Play's state of the subscription keyed `tok-a`, read with `token`."""
    return fact(
        "tok-a", source="android_store", product_id="pro", stated_at=stated_at,
        expires_at=expires_at or stated_at + timedelta(days=30), current_token=token, **kwargs,
    )  # fmt: skip


def test_a_late_older_statement_does_not_roll_the_current_token_back(db: Database, workspace: dict[str, Any]) -> None:
    now = datetime.now(UTC)
    ws, app = workspace["workspace_id"], workspace["app_id"]
    upgraded_until = now + timedelta(days=365)
    with db.write() as conn:
        ledger.apply_receipt(conn, workspace_id=ws, app_id=app, user_id="u1", fact=play_fact("tok-a", now))
        # The upgrade's new token, read a minute later (a notification).
        newer = play_fact("tok-b", now + timedelta(minutes=1), upgraded_until)
        ledger.apply_statement(conn, workspace_id=ws, app_id=app, fact=newer)
        # A read of the first token that began before the upgrade, applied after it (a sync).
        late = ledger.apply_statement(conn, workspace_id=ws, app_id=app, fact=play_fact("tok-a", now))
        # A statement naming no token (a void of a purchase nobody read) keeps the one held.
        revoked = now + timedelta(minutes=2)
        voided = play_fact("tok-b", revoked, upgraded_until, revoked_at=revoked)
        ledger.apply_statement(conn, workspace_id=ws, app_id=app, fact=replace(voided, current_token=None))
    assert late.state_changed is False
    with db.read() as conn:
        held = ledger.grant_for(conn, app_id=app, source="android_store", store_key="tok-a")
    assert held is not None
    assert held.current_token == "tok-b"
    assert held.expires_at == upgraded_until and held.revoked_at == revoked


def test_a_new_grant_records_the_token_it_was_read_with(db: Database, workspace: dict[str, Any]) -> None:
    now = datetime.now(UTC)
    ws, app = workspace["workspace_id"], workspace["app_id"]
    with db.write() as conn:
        ledger.apply_statement(conn, workspace_id=ws, app_id=app, fact=play_fact("tok-b", now))
        ledger.apply_receipt(conn, workspace_id=ws, app_id=app, user_id="u1", fact=fact("7000001"))
    with db.read() as conn:
        google = ledger.grant_for(conn, app_id=app, source="android_store", store_key="tok-a")
        apple = ledger.grant_for(conn, app_id=app, source="ios_store", store_key="7000001")
    assert google is not None and google.current_token == "tok-b"
    assert apple is not None and apple.current_token is None


@pytest.mark.parametrize("source", SOURCES)
def test_a_statement_dated_2100_cannot_outrank_a_later_genuine_one(
    db: Database, workspace: dict[str, Any], source: str
) -> None:
    """The issue's forged void dated 2100 froze a grant: genuine renewals after it changed
    nothing. Every source's statement time now counts only up to five minutes after the clock."""
    ws, app = workspace["workspace_id"], workspace["app_id"]
    now = datetime.now(UTC)
    year_2100 = datetime(2100, 1, 1, tzinfo=UTC)
    with db.write() as conn:
        ledger.apply_receipt(conn, workspace_id=ws, app_id=app, user_id="u1", fact=fact("p-1", source=source))
        forged = fact("p-1", source=source, stated_at=year_2100, revoked_at=now, revocation_reason="voided")
        ledger.apply_statement(conn, workspace_id=ws, app_id=app, fact=forged)
    with db.read() as conn:
        held = ledger.grant_for(conn, app_id=app, source=source, store_key="p-1")
        assert held is not None and held.revoked_at is not None
        assert held.stated_at <= datetime.now(UTC) + timedelta(minutes=5)
    # An hour on, the store states the renewal (a notification or a sync, read then).
    later = now + timedelta(hours=1)
    renewal = fact("p-1", source=source, stated_at=later, expires_at=later + timedelta(days=30))
    with db.write() as conn:
        applied = ledger.apply_statement(conn, workspace_id=ws, app_id=app, fact=renewal, now=later)
    assert applied.state_changed
    with db.read() as conn:
        assert ledger.current(conn, workspace_id=ws, app_id=app, user_id="u1", now=later).active
        held = ledger.grant_for(conn, app_id=app, source=source, store_key="p-1")
    assert held is not None and held.revoked_at is None and held.stated_at == later


def test_a_statement_without_a_price_keeps_the_latest_paid_price(db: Database, workspace: dict[str, Any]) -> None:
    """MRR reads each subscription's latest paid price from the ledger (issue 34): a newer
    statement that names a price replaces it, one that names none (a cancellation, a void)
    keeps it, and a late older statement never rolls it back."""
    ws, app = workspace["workspace_id"], workspace["app_id"]
    now = datetime.now(UTC)
    first_paid = now - timedelta(days=31)
    paid = fact(
        "p-9", stated_at=first_paid, price_amount=9.99, price_currency="EUR", priced_at=first_paid,
        billing_period="P1M",
    )  # fmt: skip
    renewed_at = now - timedelta(days=1)
    renewal = fact("p-9", stated_at=renewed_at, price_amount=1200.0, price_currency="JPY", priced_at=renewed_at)
    cancelled = fact("p-9", stated_at=now, auto_renew=False)
    with db.write() as conn:
        ledger.apply_receipt(conn, workspace_id=ws, app_id=app, user_id="u1", fact=paid)
    with db.read() as conn:
        held = ledger.grant_for(conn, app_id=app, source="ios_store", store_key="p-9")
    assert held is not None
    assert (held.price_amount, held.price_currency, held.priced_at, held.billing_period) == (
        9.99, "EUR", first_paid, "P1M",
    )  # fmt: skip
    with db.write() as conn:
        ledger.apply_statement(conn, workspace_id=ws, app_id=app, fact=renewal)
        ledger.apply_statement(conn, workspace_id=ws, app_id=app, fact=cancelled)
        ledger.apply_statement(conn, workspace_id=ws, app_id=app, fact=paid)  # late: older than both
    with db.read() as conn:
        held = ledger.grant_for(conn, app_id=app, source="ios_store", store_key="p-9")
    assert held is not None and held.auto_renew is False
    # The renewal's price, its own time; the billing period no later statement named stays.
    assert (held.price_amount, held.price_currency, held.priced_at, held.billing_period) == (
        1200.0, "JPY", renewed_at, "P1M",
    )  # fmt: skip
    assert ledger.fact_of_grant(held).price_amount == 1200.0


def test_a_grant_first_stated_without_a_price_has_none(db: Database, workspace: dict[str, Any]) -> None:
    ws, app = workspace["workspace_id"], workspace["app_id"]
    with db.write() as conn:
        ledger.apply_statement(conn, workspace_id=ws, app_id=app, fact=fact("p-10", in_trial=True))
    with db.read() as conn:
        held = ledger.grant_for(conn, app_id=app, source="ios_store", store_key="p-10")
    assert held is not None
    assert (held.price_amount, held.price_currency, held.priced_at, held.billing_period) == (None, None, None, None)
