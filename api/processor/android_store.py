"""Google Play real-time developer notifications, as Cloud Pub/Sub pushes them.

The push is `{"message": {"data": <base64 DeveloperNotification>, "messageId", "publishTime",
"attributes"}, "subscription"}` and is authenticated one of two ways, set per app:
- an OIDC token (`Authorization: Bearer`), which Pub/Sub signs with Google's keys for the
  audience configured on the push subscription: verified with `google-auth`
  (`id_token.verify_token`, certificates from `FLOKIT_GOOGLE_OIDC_CERTS_URL`) against the
  audience FloKit has for the app the notification's `packageName` names (`--android-push-audience`),
  issued by Google, for a verified e-mail. A token minted for another app's audience is refused.
The body is parsed only once the sender is authenticated (401 first, then 400).
- a per-app secret in the push URL (`?token=...`, `--new-android-push-token`): the app is the
  token's, and the notification's `packageName` must be that app's.

The notification is only a signal (Google: "call subscriptionsv2.get ... the source of truth"):
subscription and one-time product notifications read the purchase's state with the Play
Developer API and apply that; a voided purchase (refund, chargeback, revocation) revokes the
purchase at once; a test notification is answered 200 and not stored. Pub/Sub's `messageId` is
the dedup key: a redelivered message is applied once.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs

import google_auth_httplib2  # type: ignore[import-untyped]  # no type information shipped
import httplib2  # type: ignore[import-untyped]
from google.auth import exceptions as auth_exceptions
from google.oauth2 import id_token

from api.processor.framework import (
    Context,
    Handler,
    Incoming,
    Malformed,
    StoreUnavailable,
    Unverified,
    Verified,
)
from api.stores import ReceiptRejected
from api.stores import google_play as play
from transforms.entitlements.effects import Effects
from transforms.entitlements.facts import ANDROID_STORE
from transforms.stores import google_play as gp
from warehouse.db import utcnow
from warehouse.entitlements import ledger, stores
from warehouse.entitlements.notifications import StoredNotification
from warehouse.entitlements.stores import AppStores

PROVIDER = ANDROID_STORE
GOOGLE_ISSUERS = ("accounts.google.com", "https://accounts.google.com")


def _message(body: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Pub/Sub message and the developer notification it carries."""
    try:
        envelope = json.loads(body)
        message = envelope["message"]
        data = json.loads(base64.b64decode(message["data"], validate=True))
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise Malformed("Expected a Pub/Sub push: message.data holding a base64 JSON notification") from None
    if not isinstance(message, dict) or not isinstance(data, dict) or not isinstance(data.get("packageName"), str):
        raise Malformed("The notification has no packageName")
    return message, data


def _message_id(message: Mapping[str, Any]) -> str:
    found = message.get("messageId") or message.get("message_id")
    if not isinstance(found, str) or not found:
        raise Malformed("The Pub/Sub message has no messageId")
    return found


def _by_push_token(ctx: Context, token: str) -> AppStores:
    with ctx.database.read() as conn:
        app = stores.app_for_push_token(conn, token)
    if app is None:
        raise Unverified("Unknown push token")
    return app


def _oidc_claims(ctx: Context, bearer: str) -> Mapping[str, Any]:
    """The token's claims once its signature (Google's certificates), expiry, issuer and verified
    e-mail check out. The audience is checked against the app the notification names, which is
    only read after this (an unauthenticated body is not parsed)."""
    request = google_auth_httplib2.Request(httplib2.Http(timeout=ctx.settings.passthrough_timeout_s))
    try:
        claims = id_token.verify_token(bearer, request, audience=None, certs_url=ctx.settings.google_oidc_certs_url)
    except auth_exceptions.TransportError as e:
        raise StoreUnavailable(f"Google's OIDC certificates could not be read: {e}") from None
    except (ValueError, auth_exceptions.GoogleAuthError):
        raise Unverified("The push's OIDC token does not verify") from None
    if claims.get("iss") not in GOOGLE_ISSUERS or claims.get("email_verified") is not True:
        raise Unverified("The push's OIDC token is not Google's for a verified account")
    return claims


def _by_audience(ctx: Context, claims: Mapping[str, Any], package: str) -> AppStores:
    with ctx.database.read() as conn:
        app = stores.app_for_package(conn, package)
    audience = claims.get("aud")
    audiences = audience if isinstance(audience, list) else [audience]
    if app is None or not app.android_push_audience or app.android_push_audience not in audiences:
        raise Unverified("The push's OIDC token was not issued for the audience of this package's app")
    return app


class AndroidStore:
    def verify(self, incoming: Incoming, ctx: Context) -> Verified:
        tokens = parse_qs(incoming.query_string).get("token")
        authorization = incoming.header("Authorization") or ""
        if tokens:
            app = _by_push_token(ctx, tokens[0])
            message, data = _message(incoming.body)
            if data["packageName"] != app.android_package:
                raise Unverified("The notification is for another package than the push token's app")
        elif authorization[:7].lower() == "bearer " and authorization[7:].strip():
            claims = _oidc_claims(ctx, authorization[7:].strip())
            message, data = _message(incoming.body)
            app = _by_audience(ctx, claims, data["packageName"])
        else:
            raise Unverified("Expected a Pub/Sub OIDC token (Authorization: Bearer) or the app's push token (?token=)")
        return self._verified(app, message, data)

    def _verified(self, app: AppStores, message: Mapping[str, Any], data: dict[str, Any]) -> Verified:
        message_id = _message_id(message)
        payload = {"message_id": message_id, "publish_time": message.get("publishTime"), "notification": data}
        if "testNotification" in data:
            return Verified(PROVIDER, None, app.workspace_id, app.app_id, None, payload, note="test notification")
        return Verified(PROVIDER, message_id, app.workspace_id, app.app_id, None, payload)

    def decode(self, stored: StoredNotification, ctx: Context) -> Verified:
        message, data = _message(stored.body)
        with ctx.database.read() as conn:
            app = stores.stores_of(conn, stored.app_id) if stored.app_id else None
        if app is None:
            raise Malformed("The notification's app has no store identities any more")
        return self._verified(app, message, data)

    def effects(self, verified: Verified, ctx: Context) -> Effects:
        assert verified.app_id is not None
        with ctx.database.read() as conn:
            app = stores.stores_of(conn, verified.app_id)
        if app is None:
            raise StoreUnavailable("The app has no store identities any more")
        try:
            client = play.client_for(ctx, app)
        except ReceiptRejected as e:  # kept and retried by Pub/Sub until the operator sets them
            raise StoreUnavailable(str(e)) from None
        data: dict[str, Any] = verified.payload["notification"]
        now = utcnow()
        try:
            if isinstance(sub := data.get("subscriptionNotification"), Mapping):
                return _read(play.read_subscription(ctx, client, app, _token(sub), now=now))
            if isinstance(one := data.get("oneTimeProductNotification"), Mapping):
                sku = one.get("sku")
                if not isinstance(sku, str) or not sku:
                    raise Malformed("oneTimeProductNotification without sku")
                return _read(play.read_product(ctx, client, app, sku, _token(one), now=now))
        except play.NotFound:
            return Effects(note="Google Play knows no such purchase token for this app")
        if isinstance(void := data.get("voidedPurchaseNotification"), Mapping):
            return _voided(ctx, client, app, void, _event_time(data, verified.payload) or now, now)
        return Effects(note="no notification this processor applies")


def _token(notification: Mapping[str, Any]) -> str:
    token = notification.get("purchaseToken")
    if not isinstance(token, str) or not token:
        raise Malformed("The notification has no purchaseToken")
    return token


def _event_time(data: Mapping[str, Any], payload: Mapping[str, Any]) -> datetime | None:
    return gp.parse_millis(data.get("eventTimeMillis")) or gp.parse_time(payload.get("publish_time"))


def _read(read: play.Read) -> Effects:
    """The purchase as read; a new one is acknowledged now (Google refunds it after three days
    otherwise, and a purchase announced here may never come as a receipt)."""
    if read.effect is None:
        return Effects(note=read.note)
    if read.acknowledge is not None:
        read.acknowledge()
    return Effects(effects=[read.effect], note=read.note)


def _voided(
    ctx: Context, client: play.Client, app: AppStores, void: Mapping[str, Any], voided_at: datetime, now: datetime
) -> Effects:
    """Revoke the voided purchase's grant. A subscription's grant is under its chain's first token,
    so a later token is resolved through Google when the ledger does not hold it directly; read
    and not replaced, that token is the subscription's newest (`current_token`)."""
    token = _token(void)
    product_type = void.get("productType") if isinstance(void.get("productType"), int) else None
    with ctx.database.read() as conn:
        grant = ledger.grant_for(conn, app_id=app.app_id, source=ANDROID_STORE, store_key=token)
    key, current = token, None
    if grant is None and product_type != gp.VOIDED_ONE_TIME:
        try:
            purchase = client.subscription(token)
        except play.NotFound:
            pass
        else:
            key = play.store_key(ctx, client, app.app_id, token, purchase)
            current = None if gp.replaced(purchase) else token
        with ctx.database.read() as conn:
            grant = ledger.grant_for(conn, app_id=app.app_id, source=ANDROID_STORE, store_key=key)
    previous = ledger.fact_of_grant(grant) if grant is not None else None
    refund_type = void.get("refundType") if isinstance(void.get("refundType"), int) else None
    order = void.get("orderId") if isinstance(void.get("orderId"), str) and void.get("orderId") else None
    effect = gp.voided_effect(previous, app_id=app.app_id, workspace_id=app.workspace_id, store_key=key,
                              product_type=product_type, voided_at=voided_at, refund_type=refund_type,
                              order_id=order, received_at=now, current_token=current)  # fmt: skip
    return Effects(effects=[effect], note="voided purchase revoked")


def handler_for(path: str) -> Handler:
    return AndroidStore()
