"""Provider notifications as the providers send them (RevenueCat, Adapty, the generic provider)."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from flask.testing import FlaskClient

from tests.support.provider_notifications import connect
from transforms.webhooks.signing import service_signature
from warehouse.db import Database

AUTH = "Bearer rc-whk-5f1c9e07b3a84d26e9c0f4a7b81d352c"


def rc_event(kind: str, *, user: str = "user-7", original: str = "1000000111", **fields: Any) -> dict[str, Any]:
    at = fields.pop("at", now_ms())
    event = {
        "id": str(uuid.uuid4()).upper(),
        "type": kind,
        "app_id": "app1234",
        "event_timestamp_ms": at,
        "app_user_id": user,
        "original_app_user_id": user,
        "aliases": [user],
        "product_id": "pro_monthly",
        "period_type": "NORMAL",
        "purchased_at_ms": at - 1000,
        "expiration_at_ms": at + 30 * DAY_MS,
        "environment": "PRODUCTION",
        "store": "APP_STORE",
        "transaction_id": original,
        "original_transaction_id": original,
        "country_code": "US",
        "currency": "EUR",
        "price": 10.99,
        "price_in_purchased_currency": 9.99,
        "takehome_percentage": 0.7,
    }
    return event | fields


def adapty_event(
    kind: str, at: datetime, *, user: str = "user-7", expires: datetime | None = None, **props: Any
) -> Any:
    return {
        "profile_id": "00000000-0000-0000-0000-0000000000a1",
        "customer_user_id": user,
        "event_type": kind,
        "event_datetime": adapty_time(at),
        "event_properties": {
            "store": "play_store",
            "currency": "EUR",
            "price_usd": 4.99,
            "price_local": 4.59,
            "environment": "Production",
            "transaction_id": "GPA.3383-0000-0000-00001",
            "original_transaction_id": "GPA.3383-0000-0000-00000",
            "vendor_product_id": "onemonth_no_trial",
            "profile_event_id": str(uuid.uuid4()),
            "purchase_date": adapty_time(at),
            "subscription_expires_at": adapty_time(expires or at + timedelta(days=30)),
            "profile_country": "AR",
        }
        | props,
        "event_api_version": 1,
    }


DAY_MS = 86_400_000


def now_ms() -> int:
    return int(time.time() * 1000)


def adapty_time(at: datetime) -> str:
    """Adapty's spelling: `2020-07-10T15:00:00.000000+0000`."""
    return at.strftime("%Y-%m-%dT%H:%M:%S.%f+0000")


SUBSCRIPTION = "/api/providers/generic-subscription/webhook"


def iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def post(client: FlaskClient, path: str, app_id: str, body: dict[str, Any], secret: str) -> Any:
    raw = json.dumps(body).encode()
    signature = service_signature(raw, [secret], int(time.time() * 1000))
    return client.post(
        f"{path}?app={app_id}", data=raw, headers={"Service-Signature": signature, "Content-Type": "application/json"}
    )


def purchase(kind: str = "purchase", **fields: Any) -> dict[str, Any]:
    now = datetime.now(UTC)
    return {
        "id": "evt_1",
        "type": kind,
        "user_id": "user-7",
        "purchase_id": "sub_9",
        "product_id": "pro_monthly",
        "kind": "subscription",
        "channel": "web",
        "environment": "production",
        "occurred_at": iso(now - timedelta(minutes=5)),
        "expires_at": iso(now + timedelta(days=30)),
        "revenue": 9.99,
        "currency": "EUR",
    } | fields


PATH = "/api/providers/subscription_provider_a/webhook"


def integration(db: Database, workspace: dict[str, Any], **extra: Any) -> str:
    raw = {"api_key": "sk_rc_0123456789abcdef", "project_id": "proj1a2b3c4d"}
    raw |= {"webhook_authorization": AUTH, "app_id": workspace["app_id"]} | extra
    return connect(db, workspace["workspace_id"], "subscription_provider_a", raw)
