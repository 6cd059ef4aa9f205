"""`ios_store` (Apple App Store): Server Notifications V2 (`POST /webhooks/ios_store`, `{"signedPayload"}`).

The signed payload, then the signed transaction and renewal info inside it, are verified with
Apple's library for the app whose bundle id the payload names (`api.receipts.ios_store`); the app is
never taken from anything unsigned. A notification's own `notificationUUID` is its dedup key, so
Apple's retries of one notification apply once; TEST notifications are acknowledged and not
stored. Replay verifies the stored bytes again (nothing in Apple's JWS expires) but without the
online revocation checks, so a replay never depends on Apple's OCSP service being reachable.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime

from appstoreserverlibrary.models.JWSRenewalInfoDecodedPayload import JWSRenewalInfoDecodedPayload
from appstoreserverlibrary.models.JWSTransactionDecodedPayload import JWSTransactionDecodedPayload
from appstoreserverlibrary.models.NotificationTypeV2 import NotificationTypeV2
from appstoreserverlibrary.models.ResponseBodyV2DecodedPayload import ResponseBodyV2DecodedPayload

from api.notifications.framework import Context, Handler, Incoming, Malformed, Unverified, Verified
from api.receipts.ios_store import NotVerifiable, checked, verifier_for
from transforms.entitlements.effects import Effects
from transforms.purchases import ios_store
from warehouse.db import utcnow
from warehouse.entitlements.notifications import StoredNotification
from warehouse.entitlements.stores import AppStores

PROVIDER = "ios_store"


@dataclass(frozen=True)
class Decoded:
    """A verified notification with its verified transaction and renewal info (when it has them)."""

    stores: AppStores
    notification: ResponseBodyV2DecodedPayload
    transaction: JWSTransactionDecodedPayload | None
    renewal: JWSRenewalInfoDecodedPayload | None
    received_at: datetime


def _signed_payload(body: bytes) -> str:
    try:
        parsed = json.loads(body)
    except (UnicodeDecodeError, ValueError):
        raise Malformed("The body is not JSON") from None
    payload = parsed.get("signedPayload") if isinstance(parsed, dict) else None
    if not isinstance(payload, str) or not payload:
        raise Malformed('The body has no "signedPayload"')
    return payload


def _verified(body: bytes, ctx: Context, *, online: bool, received_at: datetime) -> Verified:
    signed = _signed_payload(body)
    try:
        app = verifier_for(ctx, signed, online=online)
        deadline = time.monotonic() + ctx.settings.passthrough_timeout_s  # one budget for the three

        def left() -> float:
            return max(0.0, deadline - time.monotonic())

        notification = checked(app, lambda: app.verifier.verify_and_decode_notification(signed), timeout_s=left())
        data = notification.data
        txn = renewal = None
        if data is not None and data.signedTransactionInfo:
            signed_txn = data.signedTransactionInfo
            txn = checked(app, lambda: app.verifier.verify_and_decode_signed_transaction(signed_txn), timeout_s=left())
        if data is not None and data.signedRenewalInfo:
            signed_renewal = data.signedRenewalInfo
            renewal = checked(
                app, lambda: app.verifier.verify_and_decode_renewal_info(signed_renewal), timeout_s=left()
            )
    except NotVerifiable as e:
        raise Unverified(str(e)) from None
    stores = app.stores
    kind = notification.rawNotificationType or ""
    if kind == NotificationTypeV2.TEST.value:
        return Verified(PROVIDER, None, stores.workspace_id, stores.app_id, None, None, note="TEST notification")
    if not notification.notificationUUID:
        raise Malformed("The notification has no notificationUUID")
    decoded = Decoded(stores, notification, txn, renewal, received_at)
    return Verified(PROVIDER, notification.notificationUUID, stores.workspace_id, stores.app_id, None, decoded, kind)


class AppStoreNotifications:
    def verify(self, incoming: Incoming, ctx: Context) -> Verified:
        return _verified(incoming.body, ctx, online=ctx.settings.apple_online_checks, received_at=utcnow())

    def decode(self, stored: StoredNotification, ctx: Context) -> Verified:
        return _verified(stored.body, ctx, online=False, received_at=stored.received_at)

    def effects(self, verified: Verified, ctx: Context) -> Effects:
        decoded = verified.payload
        assert isinstance(decoded, Decoded)
        try:
            return ios_store.notification_effects(
                decoded.notification,
                decoded.transaction,
                decoded.renewal,
                app_id=decoded.stores.app_id,
                workspace_id=decoded.stores.workspace_id,
                received_at=decoded.received_at,
            )
        except ios_store.Unmappable as e:  # Apple's retries would not change it: acknowledged, noted
            return Effects(note=f"{verified.note}: not recorded: {e}")


def handler_for(path: str) -> Handler:
    return AppStoreNotifications()
