"""`android_store` (Google Play): real-time developer notifications, as Cloud Pub/Sub pushes them.

The push is `{"message": {"data": <base64 DeveloperNotification>, "messageId", "publishTime",
"attributes"}, "subscription"}` and is authenticated one of two ways, set per app:
- an OIDC token (`Authorization: Bearer`), which Pub/Sub signs with Google's keys as the push
  subscription's service account, for the audience configured on it: its signature and expiry
  verified with `google-auth` (`jwt.decode`, certificates from `FLOKIT_GOOGLE_OIDC_CERTS_URL`,
  cached per process for their `Cache-Control: max-age`), issued by Google for a verified
  e-mail, for the audience FloKit has for the app the notification's `packageName` names
  (`--android-push-audience`) AND to that app's push service account (`email` =
  `--android-push-service-account`: Google signs tokens for any audience for any account, so an
  app with an audience and no service account refuses OIDC pushes). A token not even shaped as
  Google's ID tokens is refused before any certificate is fetched.
The body is parsed only once the sender is authenticated (401 first, then 400).
- a per-app secret in the push URL (`?token=...`, `--new-android-push-token`): the app is the
  token's, and the notification's `packageName` must be that app's.

The notification is only a signal (Google: "call subscriptionsv2.get ... the source of truth"):
subscription and one-time product notifications read the purchase's state with the Play
Developer API and apply that; a voided purchase (refund, chargeback, revocation) is looked up in
Google's voided purchases (`voidedpurchases.list`, the last 30 days) and revokes the purchase at
once when Google lists it, as Google records it; a void Google does not list changes nothing
(200, so Pub/Sub stops retrying); a test notification is answered 200 and not stored. Pub/Sub's `messageId` is
the dedup key: a redelivered message is applied once.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs

import google_auth_httplib2  # type: ignore[import-untyped]  # no type information shipped
import httplib2  # type: ignore[import-untyped]
from google.auth import exceptions as auth_exceptions
from google.auth import jwt

from api.notifications.framework import (
    Context,
    Handler,
    Incoming,
    Malformed,
    StoreUnavailable,
    Unverified,
    Verified,
)
from api.receipts import ReceiptRejected
from api.receipts import android_store as play
from transforms.entitlements.effects import Effects
from transforms.entitlements.facts import ANDROID_STORE
from transforms.purchases import android_store as gp
from warehouse.db import utcnow
from warehouse.entitlements import ledger, stores
from warehouse.entitlements.notifications import StoredNotification
from warehouse.entitlements.stores import AppStores

log = logging.getLogger("flokit.processor.android_store")

PROVIDER = ANDROID_STORE
GOOGLE_ISSUERS = ("accounts.google.com", "https://accounts.google.com")
NOT_OUR_PUSH = "The push's OIDC token was not issued to this package's app's push subscription"
# Google's certificates are reused for their `Cache-Control: max-age` (hours, in Google's
# answers), this long when the answer states none, and never longer than a day.
CERTS_DEFAULT_MAX_AGE_S = 300
CERTS_MAX_AGE_CAP_S = 86_400
# A token naming a key the cached certificates lack is worth one fetch a minute at most (Google
# publishes a new key before signing with it; a made-up `kid` must not cost a fetch per push).
CERTS_REFETCH_AFTER_S = 60


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


@dataclass(frozen=True)
class _Certs:
    """Google's OIDC certificates (`{key id: PEM}`) as fetched, with when (monotonic seconds)."""

    keys: Mapping[str, str]
    fetched: float
    fresh_until: float


def _fetch_certs(ctx: Context) -> _Certs:
    url = ctx.settings.google_oidc_certs_url
    request = google_auth_httplib2.Request(httplib2.Http(timeout=ctx.settings.passthrough_timeout_s))
    try:
        response = request(url, method="GET")
    except auth_exceptions.TransportError as e:
        raise StoreUnavailable(f"Google's OIDC certificates could not be read: {e}") from None
    if response.status != 200:
        raise StoreUnavailable(f"Google's OIDC certificates could not be read: {url} answered {response.status}")
    try:
        keys = json.loads(response.data)
    except ValueError:
        keys = None
    if not isinstance(keys, dict) or not all(isinstance(v, str) for v in keys.values()):
        raise StoreUnavailable(f"Google's OIDC certificates could not be read: {url} answered no {{kid: PEM}} map")
    headers = {str(k).lower(): str(v) for k, v in dict(response.headers).items()}
    age = gp.max_age(headers.get("cache-control"))
    now = time.monotonic()
    fresh = CERTS_DEFAULT_MAX_AGE_S if age is None else min(age, CERTS_MAX_AGE_CAP_S)
    return _Certs(keys, now, now + fresh)


def _certs(ctx: Context, kid: str) -> Mapping[str, str]:
    """Google's certificates, from this process's cache while fresh (`Cache-Control`), fetched
    again when stale, or when they lack `kid` and were fetched over a minute ago."""
    key = f"google_oidc_certs:{ctx.settings.google_oidc_certs_url}"
    held = ctx.cache.get(key)
    now = time.monotonic()
    if (
        isinstance(held, _Certs)
        and now < held.fresh_until
        and (kid in held.keys or now - held.fetched < CERTS_REFETCH_AFTER_S)
    ):
        return held.keys
    fetched = _fetch_certs(ctx)
    ctx.cache[key] = fetched
    return fetched.keys


def _oidc_claims(ctx: Context, bearer: str) -> Mapping[str, Any]:
    """The token's claims once its signature (Google's certificates), expiry, issuer and verified
    e-mail check out. A token not even shaped as Google's (`gp.id_token_header`) is refused before
    any certificate is fetched. The audience and sender are checked against the app the
    notification names, which is only read after this (an unauthenticated body is not parsed)."""
    header = gp.id_token_header(bearer)
    if header is None:
        raise Unverified("The push's OIDC token does not verify")
    try:
        claims: Mapping[str, Any] = jwt.decode(bearer, certs=_certs(ctx, header["kid"]), audience=None)
    except (ValueError, auth_exceptions.GoogleAuthError):
        raise Unverified("The push's OIDC token does not verify") from None
    if claims.get("iss") not in GOOGLE_ISSUERS or claims.get("email_verified") is not True:
        raise Unverified("The push's OIDC token is not Google's for a verified account")
    return claims


def _by_audience(ctx: Context, claims: Mapping[str, Any], package: str) -> AppStores:
    """The package's app, when the token is its push subscription's: issued for the app's audience
    AND to the app's push service account. Google signs ID tokens for any audience for any
    account (`gcloud auth print-identity-token --audiences=...`), so the audience alone proves
    nothing; an app without a push service account refuses every OIDC push until the operator
    sets it (`flokit admin apps stores --android-push-service-account`)."""
    with ctx.database.read() as conn:
        app = stores.app_for_package(conn, package)
    audience = claims.get("aud")
    audiences = audience if isinstance(audience, list) else [audience]
    if app is None or not app.android_push_audience or app.android_push_audience not in audiences:
        raise Unverified(NOT_OUR_PUSH)
    if not app.android_push_service_account:
        log.warning(
            "Google Play OIDC push refused: the app has a push audience but no push service account; set it with "
            f"`flokit admin apps stores --app {app.app_id} --android-push-service-account EMAIL`",
            extra={"app_id": app.app_id},
        )
        raise Unverified(NOT_OUR_PUSH)
    email = claims.get("email")
    if not isinstance(email, str) or email.lower() != app.android_push_service_account.lower():
        log.info("Google Play OIDC push refused: the token's e-mail is not the app's push service account",
                 extra={"app_id": app.app_id})  # fmt: skip
        raise Unverified(NOT_OUR_PUSH)
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
            return _voided(ctx, client, app, void, now)
        return Effects(note="no notification this processor applies")


def _token(notification: Mapping[str, Any]) -> str:
    token = notification.get("purchaseToken")
    if not isinstance(token, str) or not token:
        raise Malformed("The notification has no purchaseToken")
    return token


def _read(read: play.Read) -> Effects:
    """The purchase as read; a new one is acknowledged now (Google refunds it after three days
    otherwise, and a purchase announced here may never come as a receipt)."""
    if read.effect is None:
        return Effects(note=read.note)
    if read.acknowledge is not None:
        read.acknowledge()
    return Effects(effects=[read.effect], note=read.note)


def _voided(ctx: Context, client: play.Client, app: AppStores, void: Mapping[str, Any], now: datetime) -> Effects:
    """Revoke the voided purchase's grant, once Google confirms the void (`voidedpurchases.list`):
    the notification is only a signal, and a void Google does not list changes nothing (no
    revocation, no grant, no refund). What is applied is Google's record: its order and its
    `voidedTimeMillis`, never the notification's. A subscription's grant is under its chain's
    first token, so a later token is resolved through Google when the ledger does not hold it
    directly; read and not replaced, that token is the subscription's newest (`current_token`)."""
    token = _token(void)
    named_order = void.get("orderId") if isinstance(void.get("orderId"), str) and void.get("orderId") else None
    record = play.confirmed_void(client, token, named_order, now=now)
    if record is None:
        log.warning("a Google Play void Google does not confirm changed nothing",
                    extra={"app_id": app.app_id, "token_sha256": play.digest(token)})  # fmt: skip
        return Effects(note="Google Play does not confirm this void (not in its voided purchases): nothing changed")
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
    order = record.get("orderId") if isinstance(record.get("orderId"), str) and record.get("orderId") else None
    voided_at = gp.parse_millis(record.get("voidedTimeMillis")) or now
    effect = gp.voided_effect(previous, app_id=app.app_id, workspace_id=app.workspace_id, store_key=key,
                              product_type=product_type, voided_at=voided_at, refund_type=gp.refund_type_of(record),
                              order_id=order, received_at=now, current_token=current)  # fmt: skip
    return Effects(effects=[effect], note="voided purchase revoked")


def handler_for(path: str) -> Handler:
    return AndroidStore()
