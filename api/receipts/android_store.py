"""`android_store` (Google Play): purchases read with the Play Developer API (`clients.android_store`).

Each app's service account (`flokit admin apps stores --android-service-account FILE`) signs
its own OAuth token requests (`google-auth`, at the key file's `token_uri`); the API is at
`FLOKIT_GOOGLE_PLAY_API_URL`. Both can be on 127.0.0.1 (the tests' fakes).

Every call has `passthrough_timeout_s` (the spec's 10 s downstream limit) as its socket timeout,
set on the `httplib2.Http` each call gets: httplib2 objects are not thread-safe and have no
per-request timeout, so the built service (static discovery, parsed once per app) is cached and
each call runs on a fresh `AuthorizedHttp`. No answer in time: `StoreTimeout` (504); a refused
connection, a 5xx or a 429: `StoreUnavailable` (502) (`framework.store_errors`); 400/404/410 (a
token Google does not know for this app): the purchase is not vouched for. A notified void is vouched for by Google's
voided purchases (`confirmed_void`), never by the notification.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from api.notifications.framework import Context, StoreUnavailable, store_errors
from api.receipts import ReceiptRejected, VerifiedPurchase
from clients import android_store as play_api
from clients.android_store import NotFound
from transforms.entitlements.effects import Effect
from transforms.entitlements.facts import ANDROID_STORE
from transforms.purchases import android_store as gp
from warehouse.db import utcnow
from warehouse.entitlements import ledger, stores
from warehouse.entitlements.stores import AppStores

log = logging.getLogger("flokit.stores.google_play")

VOIDED_HORIZON = timedelta(days=30)  # how far back voidedpurchases.list reaches
# Our clock and Google's differ: a startTime of exactly 30 days ago could be refused as older.
HORIZON_MARGIN = timedelta(minutes=10)
MAX_VOIDED_PAGES = 20  # 20 000 voids in 30 days; a void not among them is not confirmed


class Client(play_api.PurchasesApi):
    """The gateway's Play client: its failures as the processor's (`framework.store_errors`)."""

    def call(self, request: Any) -> dict[str, Any]:
        with store_errors():
            return super().call(request)


def client_for(ctx: Context, app: AppStores) -> Client:
    """The app's client, cached per process under its credentials (a rotated key builds anew)."""
    if not ctx.settings.instance_key:
        raise ReceiptRejected("No instance key is configured here to unseal the app's Google credentials")
    with ctx.database.read() as conn:
        info = stores.android_credentials(conn, app_id=app.app_id, instance_key=ctx.settings.instance_key)
    if info is None or not app.android_package:
        raise ReceiptRejected(
            f"No tenant provisioned for this Android app: set its package and service account with "
            f"`flokit admin apps stores --app {app.app_id}`"
        )
    fingerprint = hashlib.sha256(json.dumps(info, sort_keys=True).encode("utf-8")).hexdigest()
    key = f"google_play:{app.app_id}:{fingerprint}:{ctx.settings.google_play_api_url}:"
    key += str(ctx.settings.passthrough_timeout_s)
    found = ctx.cache.get(key)
    if isinstance(found, Client):
        return found
    timeout = ctx.settings.passthrough_timeout_s
    try:
        credentials, service = play_api.service_for(info, api_url=ctx.settings.google_play_api_url, timeout=timeout)
    except ValueError as e:
        raise ReceiptRejected(f"The app's Google service account key cannot be used: {e}") from None
    client = Client(app.android_package, service, credentials, timeout)
    ctx.cache[key] = client
    return client


def store_key(ctx: Context, client: Client, app_id: str, token: str, purchase: Mapping[str, Any]) -> str:
    """The subscription's lasting key (`gp.resolve_store_key`), from the ledger, else through Google."""

    def held(linked: str) -> str | None:
        with ctx.database.read() as conn:
            grant = ledger.grant_for(conn, app_id=app_id, source=ANDROID_STORE, store_key=linked)
        return None if grant is None else str(grant.store_key)

    def linked_of(linked: str) -> object:
        try:
            return client.subscription(linked).get("linkedPurchaseToken")
        except NotFound:
            return None

    return gp.resolve_store_key(token, purchase, held=held, linked_of=linked_of)


def confirmed_void(client: Client, token: str, order_id: str | None, *, now: datetime) -> Mapping[str, Any] | None:
    """Google's record of the void of `token` (and `order_id`) in the last 30 days
    (`gp.confirmed_void` over `voidedpurchases.list`), or None: a notification alone is no proof
    that a purchase was voided. Pages until found, `MAX_VOIDED_PAGES` at most."""
    start, page = now - VOIDED_HORIZON + HORIZON_MARGIN, None
    for _ in range(MAX_VOIDED_PAGES):
        body = client.voided_page(start=start, page=page)
        listed = body.get("voidedPurchases")
        items = [v for v in listed if isinstance(v, Mapping)] if isinstance(listed, list) else []
        found = gp.confirmed_void(items, token=token, order_id=order_id)
        if found is not None:
            return found
        paging = body.get("tokenPagination")
        following = paging.get("nextPageToken") if isinstance(paging, Mapping) else None
        if not isinstance(following, str) or not following or following == page:
            return None
        page = following
    log.warning("a voided purchase was not among the first pages of Google's list", extra={
        "token_sha256": digest(token), "pages": MAX_VOIDED_PAGES})  # fmt: skip
    return None


@dataclass(frozen=True)
class Read:
    """A purchase as Google states it now, mapped: its effect and whether it awaits acknowledgement."""

    effect: Effect | None  # None: nothing to apply (a subscription replaced by a newer purchase)
    acknowledge: Callable[[], None] | None
    note: str = ""


def read_subscription(ctx: Context, client: Client, app: AppStores, token: str, *, now: datetime) -> Read:
    """`subscriptionsv2.get`, mapped (`NotFound` propagates)."""
    purchase = client.subscription(token)
    if gp.replaced(purchase):
        return Read(None, None, "replaced by a newer purchase, whose notifications carry its state")
    try:
        key = store_key(ctx, client, app.app_id, token, purchase)
        fact = gp.subscription_fact(purchase, store_key=key, token=token, stated_at=now)
    except gp.UnexpectedPayload as e:
        raise StoreUnavailable(f"Google Play answered an unreadable subscription: {e}") from None

    def events(user: str | None) -> list[Any]:
        return gp.subscription_events(purchase, fact, workspace_id=app.workspace_id, user_id=user, received_at=now)

    acknowledge = None
    if gp.subscription_pending_acknowledgement(purchase) and fact.product_id:
        product = fact.product_id
        acknowledge = _acknowledging(lambda: client.acknowledge_subscription(product, token), token)
    return Read(Effect(app.app_id, fact, events), acknowledge)


def read_product(ctx: Context, client: Client, app: AppStores, product_id: str, token: str, *, now: datetime) -> Read:
    """`products.get`, mapped (`NotFound` propagates)."""
    purchase = client.product(product_id, token)
    fact = gp.product_fact(purchase, purchase_token=token, product_id=product_id, stated_at=now)

    def events(user: str | None) -> list[Any]:
        return gp.product_events(purchase, fact, workspace_id=app.workspace_id, user_id=user, received_at=now)

    acknowledge = None
    if gp.product_pending_acknowledgement(purchase):
        acknowledge = _acknowledging(lambda: client.acknowledge_product(product_id, token), token)
    return Read(Effect(app.app_id, fact, events), acknowledge)


def _acknowledging(step: Callable[[], None], token: str) -> Callable[[], None]:
    """The acknowledgement as a step that never fails its caller: a receipt runs it once the
    ledger committed, a notification before applying (the purchase is Google's either way). A
    failure is logged, not answered: the purchase stays pending at Google, so the next receipt
    or notification of it acknowledges again, within Google's three days."""

    def run() -> None:
        try:
            step()
        except Exception as e:  # StoreUnavailable, StoreTimeout: the verdict stands
            log.warning("acknowledging a Google Play purchase failed", extra={"token_sha256": digest(token),
                                                                                "error": str(e)})  # fmt: skip

    return run


def digest(token: str) -> str:
    """A short digest of a purchase token for the log (the token itself is a credential of the purchase)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()[:16]


def app_for_package(ctx: Context, package_name: str) -> AppStores:
    with ctx.database.read() as conn:
        app = stores.app_for_package(conn, package_name)
    if app is None:
        raise ReceiptRejected(f"No tenant provisioned for Android package {package_name!r}")
    return app


def verify_receipt(
    ctx: Context, package_name: str, purchase_token: str, product_id: str | None = None
) -> VerifiedPurchase:
    """The purchase behind `purchase_token`, as Google states it now.

    Subscriptions need only the token (`subscriptionsv2.get`); a one-time product's
    `products.get` also needs its product id, which the receipt then carries as `productId`
    (Play Billing's `Purchase.getProducts()`). A subscription that another purchase replaced is
    refused: its successor's token states the purchase."""
    app = app_for_package(ctx, package_name)
    client = client_for(ctx, app)
    now = utcnow()
    try:
        read = read_subscription(ctx, client, app, purchase_token, now=now)
    except NotFound:
        if not product_id:
            raise ReceiptRejected(
                "Google Play knows no subscription with this purchase token for this app (for a one-time product, "
                "send its productId)"
            ) from None
        try:
            read = read_product(ctx, client, app, product_id, purchase_token, now=now)
        except NotFound:
            raise ReceiptRejected("Google Play knows no purchase with this token for this app and product") from None
    if read.effect is None:
        raise ReceiptRejected("This subscription was replaced by a newer purchase: verify that purchase's token")
    return VerifiedPurchase(stores=app, effect=read.effect, after_commit=read.acknowledge)
