"""0190: the credentials stored with provider notifications before it are blanked, on both databases."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa

from warehouse import migrate
from warehouse.db import Database
from warehouse.entitlements.tables import store_notifications
from warehouse.tables import workspaces

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
RC_AUTHORIZATION = "Bearer rc-live-4f0a9c2e7b1d5836a0e9f2c4b7d1e358"
OIDC = "eyJhbGciOiJSUzI1NiJ9.eyJhdWQiOiJodHRwczovL2Zsb2tpdCJ9.c2lnbmF0dXJlLW9mLWdvb2dsZQ"
PUSH_TOKEN = "apt_Zq8Kx3Lm9Vb2Nc7Hd5Fg1Jk4Ps6Rt0Wy"


def _notification(notification_id: str, provider: str, headers: dict[str, str], query: str) -> dict[str, object]:
    return {
        "id": notification_id, "provider": provider, "dedup_key": notification_id, "workspace_id": "ws_1",
        "body": b'{"event": {}}', "headers": headers, "query_string": query, "status": "applied", "attempts": 1,
        "received_at": T0,
    }  # fmt: skip


def _file_bytes(db: Database) -> bytes:
    path = Path(db.engine.url.database or "")
    return b"".join(p.read_bytes() for p in path.parent.iterdir() if p.name.startswith(path.name))


def test_0190_blanks_the_credentials_stored_with_notifications(db: Database) -> None:
    migrate.downgrade(db, "0170")
    with db.engine.begin() as conn:
        conn.execute(workspaces.insert().values(id="ws_1", name="Acme", created_at=T0))
        conn.execute(store_notifications.insert(), [
            _notification("ntf_rc", "subscription_provider_a",
                          {"Authorization": RC_AUTHORIZATION, "Content-Type": "application/json"},
                          "integration=int_1"),
            _notification("ntf_oidc", "android_store", {"Authorization": f"Bearer {OIDC}"}, ""),
            _notification("ntf_push", "android_store", {"Content-Type": "application/json"}, f"token={PUSH_TOKEN}"),
        ])  # fmt: skip

    assert migrate.upgrade(db) == [migrate.head()]

    with db.engine.connect() as conn:
        rows = conn.execute(
            sa.select(store_notifications.c.id, store_notifications.c.headers, store_notifications.c.query_string,
                      store_notifications.c.body).order_by(store_notifications.c.id)
        ).all()  # fmt: skip
    assert [(r.id, r.headers, r.query_string) for r in rows] == [
        ("ntf_oidc", {}, ""), ("ntf_push", {}, ""), ("ntf_rc", {}, "")
    ]  # fmt: skip
    assert {bytes(r.body) for r in rows} == {b'{"event": {}}'}  # what replay reads is kept
    if db.is_sqlite:  # the file as a backup would copy it once the upgrade is done
        db.engine.dispose()
        held = _file_bytes(db)
        for secret in (RC_AUTHORIZATION, OIDC, PUSH_TOKEN):
            assert secret.encode() not in held, secret
    assert migrate.drift(db) == []
