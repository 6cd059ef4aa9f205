"""Each app's identities in the stores, and the credentials FloKit verifies its purchases with.

The operator sets them (`flokit admin apps stores`). Receipts and notifications find their app
by what the store signed (bundle id, package name) or by a secret only the app's push
subscription knows, never by a field a caller could choose. Credentials are sealed under the
instance key (purpose `app-store-credentials`, bound to the app id) and unsealed only to verify.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from transforms import sealing
from warehouse.audit import record as audit
from warehouse.db import utcnow
from warehouse.entitlements.tables import app_stores
from warehouse.errors import Conflict, NotFound
from warehouse.tables import apps

SEAL_PURPOSE = "app-store-credentials"
PUSH_TOKEN_BYTES = 32


@dataclass(frozen=True)
class AppStores:
    """An app's store identities (no secret: what `flokit admin apps stores` shows)."""

    app_id: str
    workspace_id: str
    ios_bundle_id: str | None = None
    ios_app_apple_id: int | None = None
    ios_environment: str | None = None
    android_package: str | None = None
    android_service_account: str | None = None
    android_push_audience: str | None = None
    android_push_service_account: str | None = None
    android_push_token_set: bool = False
    generic_secret_set: bool = False

    def public(self) -> dict[str, Any]:
        return {
            "app_id": self.app_id,
            "ios": {
                "bundle_id": self.ios_bundle_id,
                "app_apple_id": self.ios_app_apple_id,
                "environment": self.ios_environment,
            },
            "android": {
                "package": self.android_package,
                "service_account": self.android_service_account,
                "push_audience": self.android_push_audience,
                "push_service_account": self.android_push_service_account,
                "push_token_set": self.android_push_token_set,
            },
            "generic_secret_set": self.generic_secret_set,
        }


def _view(row: Any) -> AppStores:
    return AppStores(
        app_id=row.app_id,
        workspace_id=row.workspace_id,
        ios_bundle_id=row.ios_bundle_id,
        ios_app_apple_id=row.ios_app_apple_id,
        ios_environment=row.ios_environment,
        android_package=row.android_package,
        android_service_account=row.android_service_account,
        android_push_audience=row.android_push_audience,
        android_push_service_account=row.android_push_service_account,
        android_push_token_set=row.android_push_token_sha256 is not None,
        generic_secret_set=row.generic_secret is not None,
    )


def push_token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class StoresUpdate:
    """What `set_stores` changes; None leaves a field as it is."""

    ios_bundle_id: str | None = None
    ios_app_apple_id: int | None = None
    ios_environment: str | None = None
    android_package: str | None = None
    android_service_account_json: str | None = None  # the key file's text; validated by the caller
    android_push_audience: str | None = None
    # The push subscription's service account e-mail (its OIDC tokens' `email`); validated by the caller.
    android_push_service_account: str | None = None
    new_android_push_token: bool = False
    new_generic_secret: bool = False


@dataclass(frozen=True)
class SetStores:
    stores: AppStores
    android_push_token: str | None  # shown once, when one was made
    generic_secret: str | None  # shown once, when one was made


def set_stores(
    conn: Connection, *, app_id: str, update: StoresUpdate, instance_key: str, actor: str = "cli"
) -> SetStores:
    """Set the app's store identities (only the fields given). A bundle id or package name that
    another app holds is a `Conflict`: notifications could not tell the two apps apart."""
    app = conn.execute(sa.select(apps.c.id, apps.c.workspace_id).where(apps.c.id == app_id)).first()
    if app is None:
        raise NotFound(f"No app {app_id}")
    for column, value in (("ios_bundle_id", update.ios_bundle_id), ("android_package", update.android_package)):
        if value is None:
            continue
        holder = conn.execute(
            sa.select(app_stores.c.app_id).where(app_stores.c[column] == value, app_stores.c.app_id != app_id)
        ).scalar()
        if holder is not None:
            raise Conflict(f"{column.replace('_', ' ')} {value!r} is already set for app {holder}")
    values: dict[str, Any] = {"updated_at": utcnow()}
    for name in (
        "ios_bundle_id", "ios_app_apple_id", "ios_environment", "android_package", "android_push_audience",
        "android_push_service_account",
    ):  # fmt: skip
        if getattr(update, name) is not None:
            values[name] = getattr(update, name)
    if update.android_service_account_json is not None:
        info = json.loads(update.android_service_account_json)
        values["android_service_account"] = info.get("client_email")
        values["android_credentials"] = sealing.seal(
            instance_key, SEAL_PURPOSE, update.android_service_account_json.encode("utf-8"), context=app_id
        )
    push_token = generic = None
    if update.new_android_push_token:
        push_token = secrets.token_urlsafe(PUSH_TOKEN_BYTES)
        values["android_push_token_sha256"] = push_token_digest(push_token)
    if update.new_generic_secret:
        generic = "whsec_" + secrets.token_urlsafe(PUSH_TOKEN_BYTES)
        values["generic_secret"] = sealing.seal(instance_key, SEAL_PURPOSE, generic.encode("utf-8"), context=app_id)
    exists = conn.execute(sa.select(app_stores.c.app_id).where(app_stores.c.app_id == app_id)).first()
    if exists:
        conn.execute(sa.update(app_stores).where(app_stores.c.app_id == app_id).values(**values))
    else:
        conn.execute(sa.insert(app_stores).values(app_id=app_id, workspace_id=app.workspace_id, **values))
    changed = sorted(k for k in values if k != "updated_at")
    audit(conn, workspace_id=app.workspace_id, actor=actor, action="app.stores_set", subject_id=app_id,
          detail={"fields": changed})  # fmt: skip
    stores = stores_of(conn, app_id)
    assert stores is not None
    return SetStores(stores, push_token, generic)


def stores_of(conn: Connection, app_id: str) -> AppStores | None:
    row = conn.execute(sa.select(app_stores).where(app_stores.c.app_id == app_id)).first()
    return None if row is None else _view(row)


def _active_by(conn: Connection, condition: sa.ColumnElement[bool]) -> AppStores | None:
    row = conn.execute(
        sa.select(app_stores).join(apps, apps.c.id == app_stores.c.app_id).where(condition, apps.c.revoked_at.is_(None))
    ).first()
    return None if row is None else _view(row)


def app_for_bundle_id(conn: Connection, bundle_id: str) -> AppStores | None:
    return _active_by(conn, app_stores.c.ios_bundle_id == bundle_id)


def app_for_package(conn: Connection, package: str) -> AppStores | None:
    return _active_by(conn, app_stores.c.android_package == package)


def app_for_push_token(conn: Connection, token: str) -> AppStores | None:
    return _active_by(conn, app_stores.c.android_push_token_sha256 == push_token_digest(token))


def android_credentials(conn: Connection, *, app_id: str, instance_key: str) -> dict[str, Any] | None:
    """The app's Google service account key (unsealed), or None."""
    sealed = conn.execute(sa.select(app_stores.c.android_credentials).where(app_stores.c.app_id == app_id)).scalar()
    if sealed is None:
        return None
    info: dict[str, Any] = json.loads(sealing.unseal(instance_key, SEAL_PURPOSE, sealed, context=app_id))
    return info


def generic_secret(conn: Connection, *, app_id: str, instance_key: str) -> str | None:
    """The app's `Service-Signature` secret for the generic provider paths, or None."""
    sealed = conn.execute(sa.select(app_stores.c.generic_secret).where(app_stores.c.app_id == app_id)).scalar()
    return None if sealed is None else sealing.unseal(instance_key, SEAL_PURPOSE, sealed, context=app_id).decode()
