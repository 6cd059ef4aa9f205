"""The sign-in tables on both databases: a raced link signs in once, the migration goes both ways."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tests.support import run_together
from tests.support.dashboard import OPERATOR
from warehouse import migrate
from warehouse.dashboard import sessions
from warehouse.dashboard.tables import dashboard_login_tokens, dashboard_sessions
from warehouse.db import Database


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: dashboard/sessions.py")
def test_two_browsers_opening_one_link_at_once_get_one_session(db: Database, workspace: dict) -> None:
    with db.write() as conn:
        token = sessions.create_login_token(conn, operator=OPERATOR, workspace_id=workspace["workspace_id"])

    def open_link() -> sessions.NewSession:
        with db.write() as conn:
            return sessions.sign_in(conn, token=token)

    results = run_together(open_link, open_link, open_link)
    opened = [r for r in results if isinstance(r, sessions.NewSession)]
    refused = [r for r in results if isinstance(r, sessions.LoginRefused)]
    assert len(opened) == 1 and len(refused) == 2, results
    assert {r.reason for r in refused} == {"used"}
    with db.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(dashboard_sessions)).scalar_one() == 1
        stored = (
            conn.execute(sa.select(dashboard_login_tokens.c.token_hash)).scalar_one(),
            conn.execute(sa.select(dashboard_sessions.c.session_hash)).scalar_one(),
        )
    # Neither secret is stored in clear.
    assert token not in stored and opened[0].session_id not in stored


def test_migration_0150_down_and_up(db: Database) -> None:
    assert migrate.downgrade(db, "0140") == ["0140"]
    tables = set(sa.inspect(db.engine).get_table_names())
    assert not {"dashboard_login_tokens", "dashboard_sessions"} & tables
    assert migrate.upgrade(db) == [migrate.head()]
    tables = set(sa.inspect(db.engine).get_table_names())
    assert {"dashboard_login_tokens", "dashboard_sessions"} <= tables
