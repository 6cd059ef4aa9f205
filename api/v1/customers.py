"""Customers (issue 34, preview): look a user up, find one by any id, grant promotional access.

Every decision (statuses, transaction types, the timeline's order and page, a grant's end) is
`transforms.customers`'; the reads and writes `warehouse.customers`'. docs/spec-decisions.md,
"Customers (issue 34, preview)", lists what the issue left open and what was decided.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from flask import Response
from pydantic import BaseModel, ConfigDict, Field

from api.auth import principal, require_key
from api.context import state
from api.errors import ApiError
from api.openapi import operation
from api.responses import respond
from api.v1 import blueprint
from api.validators import Id, path_id
from transforms import customers as rules
from transforms.timefmt import iso_z, parse_iso8601
from warehouse import customers as repo
from warehouse.db import utcnow
from warehouse.errors import Invalid

PREVIEW = "Preview (issue 34): the shape may still change. "
# A user id as the ledger and the events keep it (entitlement_grants.user_id's width).
USER_ID_MAX = 200
USER_ID: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": USER_ID_MAX}
REASON_MAX = 2000  # a paragraph: what support writes down for the audit log
PRODUCT_MAX = 200  # entitlement_grants.product_id's width

Timestamp = Annotated[str, Field(json_schema_extra={"format": "date-time"})]
Store = Literal[
    "ios_store", "android_store", "payment_processor", "subscription_provider_a", "subscription_provider_b",
    "generic", "promotional",
]  # fmt: skip


class _Body(BaseModel):
    model_config = ConfigDict(strict=True)  # JSON bodies are typed as sent (as api/v1/actions.py)


class CustomerQuery(BaseModel):
    app_id: Id | None = Field(None, description="The app; required when the workspace has several.")
    timeline_limit: int = Field(
        rules.TIMELINE_LIMIT_DEFAULT,
        ge=1,
        le=rules.TIMELINE_LIMIT_MAX,
        description=f"Timeline entries (default {rules.TIMELINE_LIMIT_DEFAULT}, max {rules.TIMELINE_LIMIT_MAX}).",
    )
    timeline_before: str | None = Field(
        None,
        max_length=40,
        json_schema_extra={"format": "date-time"},
        description="ISO 8601 timestamp: only entries strictly before it (next page: the last entry's occurred_at).",
    )


class SearchQuery(BaseModel):
    query: str = Field(
        description=(
            "An exact id: user id, purchase id (Apple original transaction id, Google Play purchase token, generic "
            "purchase_id), Stripe customer or subscription id, RevenueCat or Adapty customer id."
        ),
    )


class GrantBody(_Body):
    app_id: Id
    product_id: str = Field(min_length=1, max_length=PRODUCT_MAX)
    expires_at: Timestamp | None = Field(None, description="When access ends (future); or send duration.")
    duration: str | None = Field(None, max_length=20, description="ISO 8601 duration from now: P7D, P1M, P1Y.")
    reason: str = Field(min_length=1, max_length=REASON_MAX, description="Why: kept in the audit log.")


class EndQuery(BaseModel):
    reason: str | None = Field(None, max_length=REASON_MAX, description="Why it ends early (audit log).")


class CustomerEntitlement(BaseModel):
    product_id: str | None
    active: bool
    source: Literal["iap", "web", "promotional"] = Field(description="How it was paid (the entitlement answer's).")
    store: Store
    environment: Literal["production", "sandbox"]
    expires_at: Timestamp | None
    grace_ends_at: Timestamp | None
    will_renew: bool
    grant_id: str


class Transaction(BaseModel):
    id: str = Field(description="The canonical event's id.")
    type: Literal["purchase", "renewal", "refund"]
    occurred_at: Timestamp
    revenue: float | None
    currency: str | None
    revenue_in_reporting_currency: float | None


class Purchase(BaseModel):
    purchase_id: str = Field(description="The store's lasting id of the purchase (its key in the ledger).")
    store: Store
    product_id: str | None
    kind: Literal["subscription", "lifetime", "consumable"]
    status: Literal["active", "in_trial", "in_grace", "cancelled", "expired", "refunded"]
    started_at: Timestamp
    expires_at: Timestamp | None
    in_trial: bool
    transactions: list[Transaction]


class Attribution(BaseModel):
    network: str | None
    campaign: str | None
    adgroup: str | None
    creative: str | None
    installed_at: Timestamp


class PaywallExposure(BaseModel):
    paywall_id: str
    variant_id: str | None
    version: Any
    first_seen_at: Timestamp


class TimelineEntry(BaseModel):
    occurred_at: Timestamp
    kind: Literal["event", "notification", "statement", "action"]
    summary: str
    source: str
    ref: str = Field(description="The event's, notification's, grant's or audit entry's own id.")


class Customer(BaseModel):
    user_id: str
    app_id: str
    first_seen_at: Timestamp | None
    last_seen_at: Timestamp | None
    country: str | None
    platform: str | None
    attribution: Attribution | None
    entitlements: list[CustomerEntitlement]
    purchases: list[Purchase]
    paywall_exposures: list[PaywallExposure]
    timeline: list[TimelineEntry]


class CustomerEnvelope(BaseModel):
    customer: Customer


class Found(BaseModel):
    user_id: str
    app_id: str
    matched_on: rules.MatchedOn


class SearchResult(BaseModel):
    customers: list[Found]


class Grant(CustomerEntitlement):
    user_id: str
    app_id: str
    created_at: Timestamp
    ended_at: Timestamp | None = Field(description="When it was ended early; null while it runs its course.")


class GrantEnvelope(BaseModel):
    grant: Grant


def _iso(value: Any) -> Any:
    """Datetimes in a nested value as the wire writes them."""
    if isinstance(value, datetime):
        return iso_z(value)
    if isinstance(value, dict):
        return {k: _iso(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_iso(v) for v in value]
    return value


def _app(conn: Any, app_id: str | None) -> str:
    try:
        return repo.resolve_app(conn, workspace_id=principal().workspace_id, app_id=app_id)
    except Invalid as exc:
        raise ApiError(400, str(exc)) from None


@blueprint.get("/customers/<user_id>")
@require_key()
@operation(
    summary="One customer: entitlements, purchases, paywall exposures and a live timeline",
    description=PREVIEW
    + "Read at request time from the ledger, the provider notifications, the events (those not in the lake yet "
    "from the database) and the audit log. 404 when FloKit has never heard of the user in this app.",
    query=CustomerQuery,
    responses={200: CustomerEnvelope},
    path_params={"user_id": USER_ID},
    tags=["customers"],
)
def read_customer(user_id: str, query: CustomerQuery) -> Response:
    before = None
    if query.timeline_before is not None:
        try:
            before = parse_iso8601(query.timeline_before)
        except ValueError as exc:
            raise ApiError(400, f"Invalid query parameter 'timeline_before': {exc}") from None
    app, who = state(), principal()
    with app.db.read() as conn:
        app_id = _app(conn, query.app_id)
        customer = repo.customer(
            conn, app.settings.paths, workspace_id=who.workspace_id, app_id=app_id, user_id=user_id, now=utcnow(),
            timeline_before=before, timeline_limit=query.timeline_limit,
        )  # fmt: skip
    if customer is None:
        raise ApiError(404, f"No customer {user_id} in app {app_id}")
    return respond(CustomerEnvelope.model_validate({"customer": _iso(customer)}))


@blueprint.get("/customers")
@require_key()
@operation(
    summary="Find customers by an exact id",
    description=PREVIEW
    + "Matches user ids and purchase ids, current tokens, latest transaction ids and customer ids kept in the "
    f"ledger (indexed, at most {repo.SEARCH_LIMIT} hits). A user with no purchase or grant is looked up by id "
    "with GET /v1/customers/{user_id}.",
    query=SearchQuery,
    responses={200: SearchResult},
    tags=["customers"],
)
def search_customers(query: SearchQuery) -> Response:
    try:
        text = rules.check_query(query.query)
    except rules.CustomerInputError as exc:
        raise ApiError(400, f"Invalid query parameter 'query': {exc}") from None
    with state().db.read() as conn:
        hits = repo.search(conn, workspace_id=principal().workspace_id, query=text)
    return respond(SearchResult.model_validate({"customers": [h.__dict__ for h in hits]}))


def _grant(row: Any) -> dict[str, Any]:
    now = utcnow()
    state_ = rules.GrantState(row.source, row.kind, row.expires_at, row.grace_ends_at, row.access_ends_at,
                              row.revoked_at, bool(row.in_trial), row.auto_renew)  # fmt: skip
    return _iso({
        "product_id": row.product_id, "active": rules.is_active(state_, now), "source": row.channel,
        "store": rules.store_name(row.source), "environment": row.environment, "expires_at": row.expires_at,
        "grace_ends_at": row.grace_ends_at, "will_renew": False, "grant_id": row.id, "user_id": row.user_id,
        "app_id": row.app_id, "created_at": row.created_at, "ended_at": row.revoked_at,
    })  # fmt: skip


@blueprint.post("/customers/<user_id>/entitlements")
@require_key(write=True)
@operation(
    summary="Grant promotional access",
    description=PREVIEW
    + "Grants the product to the user (known or not yet) with source promotional until expires_at or for duration "
    "from now (exactly one). Entitlement reads answer it at once; audited with the key and the reason. "
    "Not idempotent: the v1 API has no Idempotency-Key convention, so a retried request grants twice (each "
    "grant can be ended).",
    body=GrantBody,
    responses={201: GrantEnvelope},
    path_params={"user_id": USER_ID},
    tags=["customers"],
)
def grant_entitlement(user_id: str, body: GrantBody) -> Response:
    if len(user_id) > USER_ID_MAX:
        raise ApiError(400, f"Invalid path parameter 'user_id': at most {USER_ID_MAX} characters")
    now = utcnow()
    try:
        expires = parse_iso8601(body.expires_at) if body.expires_at is not None else None
    except ValueError as exc:
        raise ApiError(400, f"Invalid body field 'expires_at': {exc}") from None
    try:
        ends = rules.promotion_end(now, expires_at=expires, duration=body.duration)
    except rules.CustomerInputError as exc:
        raise ApiError(400, f"Invalid request body: {exc}") from None
    who = principal()
    with state().db.write() as conn:
        app_id = _app(conn, body.app_id)
        row = repo.grant_promotional(
            conn, workspace_id=who.workspace_id, app_id=app_id, user_id=user_id, product_id=body.product_id,
            ends_at=ends, reason=body.reason, actor=who.key_id,
        )  # fmt: skip
    location = f"/v1/customers/{user_id}/entitlements/{row.id}"
    return respond(GrantEnvelope.model_validate({"grant": _grant(row)}), 201, headers={"Location": location})


@blueprint.delete("/customers/<user_id>/entitlements/<grant_id>")
@require_key(write=True)
@operation(
    summary="End a promotional grant early",
    description=PREVIEW
    + "Answers 200 with the grant, ended now (a grant already ended is answered as it is). A store's purchase is "
    "409: only its store ends it. Audited with the key and the optional reason.",
    query=EndQuery,
    responses={200: GrantEnvelope},
    errors=(409,),
    path_params={"user_id": USER_ID, "grant_id": path_id()},
    tags=["customers"],
)
def end_entitlement(user_id: str, grant_id: str, query: EndQuery) -> Response:
    who = principal()
    with state().db.write() as conn:
        row = repo.end_promotional(
            conn, workspace_id=who.workspace_id, user_id=user_id, grant_id=grant_id, reason=query.reason,
            actor=who.key_id,
        )  # fmt: skip
    return respond(GrantEnvelope.model_validate({"grant": _grant(row)}))
