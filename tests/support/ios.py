"""What the App Store tests share: an app set up for the test PKI's bundle id, and reads of the
ledger and the landing table through warehouse functions."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from flask.testing import FlaskClient

from tests.providers.apple_pki import APP_APPLE_ID, BUNDLE_ID, ApplePki
from warehouse.db import Database
from warehouse.entitlements import ledger
from warehouse.entitlements.notifications import counts
from warehouse.entitlements.stores import StoresUpdate, set_stores
from warehouse.events.landing import day_frame, pending_days

INSTANCE_KEY = "apple-tests-instance-key-0123456789abcdef"


def set_up_ios(
    db: Database,
    app_id: str,
    *,
    bundle_id: str = BUNDLE_ID,
    environment: str = "Production",
    apple_id: int = APP_APPLE_ID,
) -> None:
    with db.write() as conn:
        set_stores(
            conn,
            app_id=app_id,
            update=StoresUpdate(ios_bundle_id=bundle_id, ios_app_apple_id=apple_id, ios_environment=environment),
            instance_key=INSTANCE_KEY,
        )


def receipt(client: FlaskClient, workspace: dict[str, Any], jws: str, user: str = "user-7", **extra: Any) -> Any:
    return client.post(
        "/api/paywall/receipt",
        json={"provider": "ios_store", "signedTransactionInfo": jws} | extra,
        headers={"x-user-id": user, "x-app-key": workspace["app_key"]},
    )


def active(db: Database, workspace: dict[str, Any], user: str, now: datetime | None = None) -> bool:
    with db.read() as conn:
        return ledger.current(
            conn, workspace_id=workspace["workspace_id"], app_id=workspace["app_id"], user_id=user, now=now
        ).active


def notify(client: FlaskClient, signed_payload: str) -> Any:
    return client.post("/webhooks/ios_store", json={"signedPayload": signed_payload})


def landed(db: Database) -> dict[str, dict[str, Any]]:
    """Every landed canonical event by id."""
    found: dict[str, dict[str, Any]] = {}
    with db.read() as conn:
        for day in pending_days(conn):
            frame, _ = day_frame(conn, day)
            found |= {row["event_id"]: row for row in frame.to_dicts()}
    return found


def stored(db: Database, workspace: dict[str, Any]) -> dict[str, int]:
    with db.read() as conn:
        return counts(conn, workspace_id=workspace["workspace_id"]).get("ios_store", {})


def pki_settings_fields(pki: ApplePki) -> dict[str, Any]:
    return {"apple_root_certs": (pki.root_path,), "apple_online_checks": False, "instance_key": INSTANCE_KEY}
