"""Publishing paywall configurations: versions count up per paywall, revoked apps serve nothing."""

import threading
from typing import Any

import pytest
import sqlalchemy as sa

from tests.support.paywalls import document
from warehouse import audit
from warehouse.db import Database
from warehouse.paywalls import configs
from warehouse.tables import apps


def test_each_publish_is_the_next_version_and_the_live_one(db: Database, workspace: dict[str, Any]) -> None:
    app_id = workspace["app_id"]
    with db.read() as conn:
        assert configs.live(conn, app_id=app_id, paywall_id="onboarding") is None
    for weights in ([100], [50, 50], [10, 90]):
        with db.write() as conn:
            configs.publish(conn, app_id=app_id, paywall_id="onboarding", document=document(weights), actor="ops@acme")
    with db.write() as conn:
        other = configs.publish(conn, app_id=app_id, paywall_id="settings", document=document([1]), actor="ops@acme")
    with db.read() as conn:
        live = configs.live(conn, app_id=app_id, paywall_id="onboarding")
        entries = audit.entries(conn, workspace_id=workspace["workspace_id"], subject_id=app_id)
    assert live is not None and live.version == 3
    assert [v.traffic_weight for v in live.document.variants] == [10, 90]
    assert other.version == 1  # versions count per paywall
    published = [e["detail"] for e in entries if e["action"] == "paywall.published"]
    assert published[-1] == {"paywall_id": "settings", "version": 1} and len(published) == 4


def test_unknown_and_revoked_apps(db: Database, workspace: dict[str, Any]) -> None:
    app_id = workspace["app_id"]
    with db.write() as conn, pytest.raises(configs.UnknownApp):
        configs.publish(conn, app_id="app_nope", paywall_id="p", document=document([1]), actor="ops")
    with db.write() as conn:
        configs.publish(conn, app_id=app_id, paywall_id="p", document=document([1]), actor="ops")
        conn.execute(sa.update(apps).where(apps.c.id == app_id).values(revoked_at=sa.func.now()))
    with db.read() as conn:
        assert configs.live(conn, app_id=app_id, paywall_id="p") is None
    with db.write() as conn, pytest.raises(configs.UnknownApp):
        configs.publish(conn, app_id=app_id, paywall_id="p", document=document([1]), actor="ops")


def test_concurrent_publishes_get_distinct_versions(db: Database, workspace: dict[str, Any]) -> None:
    """Eight publishers at once: every publish lands, as versions 1..8 (none lost to a race)."""
    app_id, errors = workspace["app_id"], []

    def publish() -> None:
        try:
            with db.write() as conn:
                configs.publish(conn, app_id=app_id, paywall_id="race", document=document([1]), actor="ops")
        except Exception as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=publish) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with db.read() as conn:
        live = configs.live(conn, app_id=app_id, paywall_id="race")
    assert live is not None and live.version == 8
