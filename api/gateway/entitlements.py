"""Entitlements: POST /api/paywall/receipt verifies a purchase upstream and records what the user
may use; GET /api/paywall/entitlement and /api/entitlements/current read it.

Verification is the upstream verifier's (FLOKIT_RECEIPT_VERIFIER_URL): it talks to the stores
and resolves the tenant. Its answer is returned as produced; a rejection (4xx) is 422, an
upstream failure 502 (504 after 10 s). When the app is known (a valid `x-app-key`), the verdict's
`active` becomes the user's entitlement, read afterwards without calling upstream.
"""

from __future__ import annotations

from typing import Any, Literal

import requests
from flask import Response, request
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from api.context import state
from api.downstream import session
from api.errors import ApiError
from api.gateway import blueprint
from api.gateway.auth import require_app, require_user
from api.openapi import operation
from api.ratelimits import count_app_client, per_address
from api.responses import respond
from api.validators import CompactJws
from warehouse.paywalls import entitlements
from warehouse.workspaces import App


class ReceiptBody(BaseModel):
    model_config = ConfigDict(extra="allow")
    provider: Literal["ios_store", "android_store"]
    signedTransactionInfo: CompactJws | None = Field(
        None, min_length=1, max_length=65536, description="The App Store's signed transaction: a compact JWS."
    )
    packageName: str | None = Field(None, min_length=1, max_length=255)
    purchaseToken: str | None = Field(None, min_length=1, max_length=4096)

    @model_validator(mode="after")
    def _provider_fields(self) -> ReceiptBody:
        if self.provider == "ios_store" and not self.signedTransactionInfo:
            raise ValueError("signedTransactionInfo is required for the ios_store provider")
        if self.provider == "android_store" and not (self.packageName and self.purchaseToken):
            raise ValueError("packageName and purchaseToken are required for the android_store provider")
        return self


def _absent(value: object) -> bool:
    return value is None


class Verification(BaseModel):
    """The upstream verifier's verdict, passed on: these fields when it sent them, then the rest
    of its answer as produced. Strict: a verdict whose `active` is not a boolean is malformed
    (502), never coerced."""

    model_config = ConfigDict(extra="allow", strict=True)
    active: bool | None = Field(None, exclude_if=_absent, description="Whether the purchase entitles the user now.")
    provider: str | None = Field(None, exclude_if=_absent)
    product_id: str | None = Field(None, exclude_if=_absent)


class EntitlementBody(BaseModel):
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


def _verify_upstream(body: dict[str, Any]) -> Verification:
    settings = state().settings
    if not settings.receipt_verifier_url:
        raise ApiError(503, "Receipt verification is not configured in this environment")
    try:
        answer = session().post(
            settings.receipt_verifier_url, json=body, timeout=settings.passthrough_timeout_s, allow_redirects=False
        )
    except requests.Timeout:
        raise ApiError(504, f"Receipt verification timed out after {settings.passthrough_timeout_s:g} s") from None
    except requests.RequestException:
        raise ApiError(502, "Receipt verification upstream unreachable") from None
    try:
        result = answer.json()
    except ValueError:
        result = None
    if 400 <= answer.status_code < 500:
        reason = result.get("error") if isinstance(result, dict) else None
        raise ApiError(422, str(reason) if reason else f"Verification rejected upstream ({answer.status_code})")
    if answer.status_code >= 300 or not isinstance(result, dict):
        raise ApiError(502, f"Receipt verification upstream failed ({answer.status_code})")
    try:
        return Verification.model_validate(result)
    except ValidationError:
        raise ApiError(502, "Receipt verification upstream answered a malformed verdict") from None


@blueprint.post("/api/paywall/receipt")
@per_address  # the key is optional: counted per address, and per app when one is sent
@operation(
    summary="Verify a store purchase",
    description="Forwards the receipt to the verification upstream and returns its result as produced "
    "(e.g. active, provider, product_id). With a valid x-app-key the result's `active` becomes the user's "
    "entitlement. 400 (before any upstream): a signedTransactionInfo that is not a compact JWS; 422: rejected "
    "upstream; 502/504: upstream failed, answered a malformed verdict, or timed out; 503: not configured.",
    body=ReceiptBody,
    responses={200: Verification},
    errors=(401, 422, 502, 503, 504),
    tags=["entitlements"],
)
def verify_receipt(body: ReceiptBody) -> Response:
    user = require_user()
    app = _optional_app()
    sent = body.model_dump(exclude_none=True) | {"user_id": user} | ({"app_id": app.id} if app else {})
    verdict = _verify_upstream(sent)
    if app is not None and verdict.active is not None:
        with state().db.write() as conn:
            entitlements.record(
                conn,
                workspace_id=app.workspace_id,
                app_id=app.id,
                user_id=user,
                active=verdict.active,
                provider=body.provider,
                product_id=verdict.product_id,
            )
    return respond(verdict)


def _entitlement(user: str) -> Response:
    key = request.headers.get("x-app-key", "").strip()
    if key:  # the hot path: key and entitlement in one query
        with state().db.read() as conn:
            found = entitlements.current_for_key(conn, publishable_key=key, user_id=user)
        if found is None:
            raise ApiError(401, "Invalid x-app-key (unknown or revoked)")
        count_app_client(key)
    else:
        app = require_app(user=user)
        with state().db.read() as conn:
            found = entitlements.current(conn, workspace_id=app.workspace_id, app_id=app.id, user_id=user)
    return respond(EntitlementBody(active=found.active, source=found.source))


@blueprint.get("/api/paywall/entitlement")
@operation(
    summary="The user's entitlement",
    description="x-app-key (or x-app-token) and x-user-id. active is false (source none) until a receipt of "
    "this user was verified with this app's key.",
    responses={200: EntitlementBody},
    errors=(401,),
    security="appKey",
    tags=["entitlements"],
)
def paywall_entitlement() -> Response:
    return _entitlement(require_user())


@blueprint.get("/api/entitlements/current")
@operation(
    summary="The user's entitlement (identity from x-user-id, then userId)",
    query=CurrentQuery,
    responses={200: EntitlementBody},
    errors=(401,),
    security="appKey",
    tags=["entitlements"],
)
def current_entitlement(query: CurrentQuery) -> Response:
    return _entitlement(require_user(query.userId))
