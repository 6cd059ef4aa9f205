"""Entitlements: POST /api/paywall/receipt verifies a purchase with the store and records it in
the ledger; GET /api/paywall/entitlement and /api/entitlements/current compute `active` from it.

Verification is in-house (`api.receipts`): the app is the one the store's signed data names, never a
field the client sends (`app_id`, `user_id`, `workspace_id` in the body are ignored). A purchase
is linked to the user who first shows it; one that belongs to another user is 422 and changes
nothing (`warehouse.entitlements.ledger`).
"""

from __future__ import annotations

from typing import Literal

from flask import Response, request
from pydantic import BaseModel, ConfigDict, Field, model_validator

from api.context import state
from api.errors import ApiError
from api.gateway import blueprint
from api.gateway.auth import require_app, require_user
from api.gateway.trusted import NONCE_DOC, SIGNED_HEADERS_DOC, SIGNED_RESPONSE_HEADERS, requested_nonce, sign
from api.notifications.framework import StoreTimeout, StoreUnavailable
from api.notifications.routes import context
from api.openapi import operation
from api.ratelimits import count_app_client, per_address
from api.receipts import ReceiptRejected, VerifiedPurchase, android_store, ios_store
from api.responses import respond
from api.validators import CompactJws
from transforms.timefmt import iso_z
from warehouse.db import utcnow
from warehouse.entitlements import ledger
from warehouse.errors import NotTheBuyer
from warehouse.events.landing import land
from warehouse.workspaces import App


class ReceiptBody(BaseModel):
    model_config = ConfigDict(extra="allow")
    provider: Literal["ios_store", "android_store"]
    signedTransactionInfo: CompactJws | None = Field(
        None, min_length=1, max_length=65536, description="The App Store's signed transaction: a compact JWS."
    )
    packageName: str | None = Field(None, min_length=1, max_length=255)
    purchaseToken: str | None = Field(None, min_length=1, max_length=4096)
    productId: str | None = Field(
        None, min_length=1, max_length=255, description="Google Play one-time products: the product id."
    )

    @model_validator(mode="after")
    def _provider_fields(self) -> ReceiptBody:
        if self.provider == "ios_store" and not self.signedTransactionInfo:
            raise ValueError("signedTransactionInfo is required for the ios_store provider")
        if self.provider == "android_store" and not (self.packageName and self.purchaseToken):
            raise ValueError("packageName and purchaseToken are required for the android_store provider")
        return self


class Verification(BaseModel):
    """The verification's result: what the store vouched for, as the ledger now holds it."""

    active: bool = Field(description="Whether this purchase entitles the user now.")
    provider: str
    product_id: str | None
    expires_at: str | None = Field(description="When the current period ends (null: never, a lifetime purchase).")
    environment: str = Field(description="production or sandbox.")
    original_transaction_id: str = Field(
        description="The purchase's lasting id: Apple's originalTransactionId, or the Google Play purchase token "
        "its renewals link back to."
    )
    in_trial: bool


class EntitlementBody(BaseModel):
    # Frozen: its few values (active x source) are serialized once per process (api/responses.py).
    model_config = ConfigDict(frozen=True)

    active: bool
    source: str = Field(description="iap when verified with a store; none when nothing was verified.")


class CurrentQuery(BaseModel):
    model_config = ConfigDict(extra="ignore")
    userId: str | None = Field(None, max_length=200, description="Identity when x-user-id is not sent.")


def _optional_app() -> App | None:
    """Receipts: the key (or an app-session token) is recommended, not enforced; one that is
    sent must be valid."""
    if not (request.headers.get("x-app-key", "").strip() or request.headers.get("x-app-token", "").strip()):
        return None
    return require_app()


def _verify(body: ReceiptBody) -> VerifiedPurchase:
    ctx = context()
    try:
        if body.provider == "ios_store":
            assert body.signedTransactionInfo is not None
            return ios_store.verify_receipt(ctx, body.signedTransactionInfo)
        assert body.packageName is not None and body.purchaseToken is not None
        return android_store.verify_receipt(ctx, body.packageName, body.purchaseToken, body.productId)
    except ReceiptRejected as e:
        raise ApiError(422, str(e)) from None
    except (StoreUnavailable, StoreTimeout) as e:
        raise ApiError(e.status, e.message) from None


@blueprint.post("/api/paywall/receipt")
@per_address  # the key is optional: counted per address, and per app when one is sent
@operation(
    summary="Verify a store purchase",
    description="Verifies the purchase with the store (App Store JWS chain and signature; Google Play Developer "
    "API) and records it in the user's entitlement ledger. The app is the one the store's data names (bundle id, "
    "package name); a key that is sent must be that app's. 200 also for a genuine purchase that has lapsed "
    "(`active: false`). 422: not vouched for by the store, another app, or a purchase that belongs to another "
    "user; 502/504: the store unreachable or silent for 10 s.",
    body=ReceiptBody,
    responses={200: Verification},
    errors=(401, 422, 502, 504),
    tags=["entitlements"],
)
def verify_receipt(body: ReceiptBody) -> Response:
    user = require_user()
    app = _optional_app()
    purchase = _verify(body)
    if app is not None and app.id != purchase.stores.app_id:
        raise ApiError(422, "This purchase is for another app than the x-app-key's")
    fact = purchase.effect.fact
    try:
        with state().db.write() as conn:
            applied = ledger.apply_receipt(
                conn, workspace_id=purchase.stores.workspace_id, app_id=purchase.stores.app_id, user_id=user, fact=fact
            )
            events = purchase.effect.events(applied.user_id)
            if events:
                land(conn, list(events))
    except NotTheBuyer as e:
        raise ApiError(422, str(e)) from None
    if purchase.after_commit is not None:
        purchase.after_commit()
    verdict = Verification(
        active=fact.active_at(utcnow()),
        provider=body.provider,
        product_id=fact.product_id,
        expires_at=iso_z(fact.expires_at),
        environment=fact.environment,
        original_transaction_id=fact.store_key,
        in_trial=fact.in_trial,
    )
    return private(respond(verdict))


_IDENTITY_HEADERS = ("x-app-key", "x-app-token", "x-user-id")


def private(response: Response) -> Response:
    """Answers about one user's purchases: never stored by a shared cache, and never served
    from a cache to a request with other identity headers."""
    response.headers["Cache-Control"] = "private, no-store"
    response.vary.update(_IDENTITY_HEADERS)
    return response


def _entitlement(user: str) -> Response:
    key = request.headers.get("x-app-key", "").strip()
    if key:  # the hot path: the key's app and the user's purchases, cached per worker until a change
        found = ledger.current_for_key_cached(state().db, publishable_key=key, user_id=user)
        if found is None:
            raise ApiError(401, "Invalid x-app-key (unknown or revoked)")
        count_app_client(key)
    else:
        app = require_app(user=user)
        with state().db.read() as conn:
            found = ledger.current(conn, workspace_id=app.workspace_id, app_id=app.id, user_id=user)
    return private(respond(EntitlementBody(active=found.active, source=found.source)))


def _answer(*fallbacks: str | None) -> Response:
    """The entitlement answer, signed when the request sent `x-nonce` (checked first: a malformed
    nonce is a client bug whatever the identity). These reads never answer 304 (no ETag, `no-store`),
    so a signed request always gets the full body its signature covers."""
    nonce = requested_nonce()
    user = require_user(*fallbacks)
    response = _entitlement(user)
    return response if nonce is None else sign(response, nonce=nonce, user_id=user)


@blueprint.get("/api/paywall/entitlement")
@operation(
    summary="The user's entitlement",
    description="x-app-key (or x-app-token) and x-user-id. active is computed now from the user's purchases in "
    "the ledger (not revoked, and before the period's end or the grace period's); source is the channel of the "
    "purchase that decides (iap, web, promotional), none when the user has no purchase." + SIGNED_HEADERS_DOC,
    responses={200: EntitlementBody},
    errors=(400, 401, 503),
    headers={"x-nonce": NONCE_DOC},
    response_headers=SIGNED_RESPONSE_HEADERS,
    security="appKey",
    tags=["entitlements"],
)
def paywall_entitlement() -> Response:
    return _answer()


@blueprint.get("/api/entitlements/current")
@operation(
    summary="The user's entitlement (identity from x-user-id, then userId)",
    description="As GET /api/paywall/entitlement; the user is x-user-id, else the userId query parameter (the "
    "signed message's user line is that user)." + SIGNED_HEADERS_DOC,
    query=CurrentQuery,
    responses={200: EntitlementBody},
    errors=(400, 401, 503),
    headers={"x-nonce": NONCE_DOC},
    response_headers=SIGNED_RESPONSE_HEADERS,
    security="appKey",
    tags=["entitlements"],
)
def current_entitlement(query: CurrentQuery) -> Response:
    return _answer(query.userId)
