"""The dashboard's "Sync now" requests for an ad account as the repository keeps them (both
databases): request, claim, finish, the history, and the one-open-request rule, which the
database itself enforces."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa

from transforms.adaccounts.kinds import validate_config
from warehouse.adaccounts import repository as accounts
from warehouse.adaccounts import sync_requests as requests
from warehouse.adaccounts.tables import ad_account_sync_requests
from warehouse.bootstrap import bootstrap
from warehouse.db import Database, utcnow
from warehouse.errors import NotFound, TransitionRefused

KEY = "k" * 43
OPERATOR = "maya@example.com"


@pytest.fixture
def account_id(db: Database, workspace: dict) -> str:
    with db.write() as conn:
        return accounts.connect(
            conn,
            workspace_id=workspace["workspace_id"],
            platform="sandbox",
            config=validate_config("sandbox", {}),
            instance_key=KEY,
            actor=OPERATOR,
        ).id


def ask(db: Database, workspace: dict, account_id: str, who: str = OPERATOR) -> tuple[requests.SyncRequest, bool]:
    with db.write() as conn:
        return requests.request_sync(
            conn, ad_account_id=account_id, workspace_id=workspace["workspace_id"], requested_by=who
        )


def test_a_request_is_pending_with_who_asked_and_a_second_answers_the_open_one(
    db: Database, workspace: dict, account_id: str
) -> None:
    first, created = ask(db, workspace, account_id)
    assert created and first.id.startswith("adsync_")
    assert (first.status, first.requested_by, first.ad_account_id) == ("pending", OPERATOR, account_id)
    assert first.workspace_id == workspace["workspace_id"] and first.run_id is None and first.started_at is None
    again, created = ask(db, workspace, account_id, who="someone@example.com")
    assert not created and again.id == first.id and again.requested_by == OPERATOR
    with db.read() as conn:
        assert [r.id for r in requests.pending_requests(conn)] == [first.id]


def test_claim_then_success_records_the_counts_and_frees_the_account(
    db: Database, workspace: dict, account_id: str
) -> None:
    asked, _ = ask(db, workspace, account_id)
    with db.write() as conn:
        running = requests.claim(conn, request_id=asked.id, run_id="run-1")
        assert requests.claim(conn, request_id=asked.id, run_id="run-2") is None  # taken once only
    assert running is not None and (running.status, running.run_id) == ("running", "run-1")
    assert running.started_at is not None
    # while running it is still the open one
    assert ask(db, workspace, account_id)[0].id == asked.id
    with db.write() as conn:
        done = requests.finish_success(
            conn,
            request_id=asked.id,
            counts=accounts.SyncCounts(created=3, updated=1, unchanged=2, removed=1),
            mapped_campaigns=2,
            mapped_creatives=1,
            summary="6 object(s) listed",
        )
    assert done.status == "succeeded" and done.finished_at is not None and done.objects_listed == 6
    assert (done.objects_created, done.objects_updated, done.objects_unchanged, done.objects_removed) == (3, 1, 2, 1)
    assert (done.mapped_campaigns, done.mapped_creatives, done.error_message) == (2, 1, None)
    with db.write() as conn, pytest.raises(TransitionRefused):
        requests.finish_failure(conn, request_id=asked.id, code=None, message="late")
    following, created = ask(db, workspace, account_id)
    assert created and following.id != asked.id
    with db.read() as conn:
        assert [r.id for r in requests.recent_requests(conn, ad_account_id=account_id)] == [following.id, asked.id]


def test_failure_keeps_the_platforms_text_and_a_pending_request_can_fail_unclaimed(
    db: Database, workspace: dict, account_id: str
) -> None:
    asked, _ = ask(db, workspace, account_id)
    with db.write() as conn:
        with pytest.raises(TransitionRefused):  # success needs a run that claimed it
            requests.finish_success(
                conn, request_id=asked.id, counts=accounts.SyncCounts(0, 0, 0, 0), mapped_campaigns=0,
                mapped_creatives=0, summary="x",
            )  # fmt: skip
        failed = requests.finish_failure(
            conn, request_id=asked.id, code="auth", message="Error validating access token: Session has expired"
        )
    assert (failed.status, failed.error_code) == ("failed", "auth")
    assert failed.error_message == "Error validating access token: Session has expired"
    assert failed.objects_listed is None and failed.started_at is None and failed.finished_at is not None
    with db.read() as conn:
        assert requests.pending_requests(conn) == [] and requests.open_requests(conn) == []


def test_the_database_refuses_a_second_open_request_for_an_account(
    db: Database, workspace: dict, account_id: str
) -> None:
    """The rule holds without the repository's check: two requests that both passed it (two
    clicks at once) cannot both insert."""
    asked, _ = ask(db, workspace, account_id)
    row = {"workspace_id": workspace["workspace_id"], "ad_account_id": account_id, "requested_by": OPERATOR,
           "requested_at": utcnow()}  # fmt: skip
    with pytest.raises(sa.exc.IntegrityError), db.write() as conn:
        conn.execute(ad_account_sync_requests.insert().values(id="adsync_second", status="pending", **row))
    with pytest.raises(sa.exc.IntegrityError), db.write() as conn:
        conn.execute(ad_account_sync_requests.insert().values(id="adsync_third", status="running", **row))
    with db.write() as conn:  # ended requests do not count
        conn.execute(ad_account_sync_requests.insert().values(id="adsync_old", status="failed", **row))
        requests.finish_failure(conn, request_id=asked.id, code=None, message="gone")
        conn.execute(ad_account_sync_requests.insert().values(id="adsync_next", status="pending", **row))
    with db.read() as conn:
        assert [r.id for r in requests.open_requests(conn)] == ["adsync_next"]


def test_another_workspaces_account_is_not_found_and_a_disconnected_one_refused(
    db: Database, workspace: dict, account_id: str
) -> None:
    with db.write() as conn:
        other = bootstrap(conn, name="Other Co")
    with pytest.raises(NotFound), db.write() as conn:
        requests.request_sync(conn, ad_account_id=account_id, workspace_id=other["workspace_id"], requested_by="x")
    with db.write() as conn:
        accounts.remove(conn, ad_account_id=account_id, workspace_id=workspace["workspace_id"], actor=OPERATOR)
    with pytest.raises(TransitionRefused, match="disconnected"):
        ask(db, workspace, account_id)
    with db.read() as conn:
        assert requests.recent_requests(conn, ad_account_id=account_id) == []


def test_history_is_newest_first_and_limited(db: Database, workspace: dict, account_id: str) -> None:
    start = utcnow() - timedelta(hours=1)
    ids = []
    for i in range(requests.HISTORY_LIMIT + 2):
        with db.write() as conn:
            asked, _ = requests.request_sync(
                conn, ad_account_id=account_id, workspace_id=workspace["workspace_id"], requested_by=OPERATOR,
                now=start + timedelta(minutes=i),
            )  # fmt: skip
            requests.finish_failure(conn, request_id=asked.id, code="rate_limited", message=f"try {i}")
        ids.append(asked.id)
    with db.read() as conn:
        recent = requests.recent_requests(conn, ad_account_id=account_id)
    assert [r.id for r in recent] == ids[::-1][: requests.HISTORY_LIMIT]
