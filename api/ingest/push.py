"""POST /ingest/attribution_provider_b: one AppsFlyer Push API message -> one ingest outcome.

AppsFlyer's Push API sends one JSON object per attributed event, by POST (support article
207034356). It is verified like vendor A's callbacks: the `secret` query parameter against the
credential of the app token (the `app_token` query parameter, else the message's `app_id`),
and the vendor's allowlist; then mapped (`transforms.ingest.attribution_provider_b`), deduplicated
and landed exactly as `/ingest/<vendor>` does (one transaction on SQLite, one statement on
PostgreSQL). A body that is not one JSON object is a 400: no retry of it can succeed.
"""

from __future__ import annotations

from flask import Response, request
from pydantic import BaseModel, ConfigDict, Field

from api.context import state
from api.errors import ApiError
from api.ingest import blueprint
from api.ingest.callbacks import _DROPPED, UNVERIFIED, IngestOutcome, _outcome
from api.openapi import operation
from api.ratelimits import rate_limits
from api.responses import respond
from transforms.ingest.attribution import Dropped
from transforms.ingest.attribution_provider_b import VENDOR, app_token, mapping_key, normalize
from transforms.ingest.network import address_allowed, client_address
from transforms.ingest.query import query_parameters
from transforms.ingest.validation import MAX_EVENT_AMOUNT_EUR
from warehouse import fx
from warehouse.db import utcnow
from warehouse.events.landing import land, single_event_connection
from warehouse.ingest.repository import callback_context, record_drop

Scalar = str | int | float | None


class PushQuery(BaseModel):
    """The query string of the Push URL pasted into AppsFlyer; `secret` is the `ingestSecret` scheme."""

    app_token: str | None = Field(
        None, description="The credential's app token; default: the message's app_id (register the AppsFlyer app id)."
    )


class PushMessage(BaseModel):
    """An AppsFlyer Push API V2.0 message (one JSON object; more fields than these arrive and are
    ignored). Documented, not refused: a bad value is dropped with its reason, as for callbacks."""

    model_config = ConfigDict(extra="allow")

    app_id: Scalar = Field(None, description="AppsFlyer app id (id123456789, com.example.app).")
    event_name: Scalar = Field(
        None,
        description="install, or the app's in-app event name (af_purchase, ...): mapped to a canonical type by "
        "the workspace mapping (install maps to install by default); unmapped: dropped.",
    )
    event_type: Scalar = Field(None, description="install, in-app-event, ...; kept as activity_kind.")
    event_time: Scalar = Field(None, description="UTC, yyyy-mm-dd hh:mm:ss.sss; missing or invalid: dropped.")
    platform: Scalar = Field(None, description="ios or android.")
    country_code: Scalar = Field(None, description="ISO 3166-1 alpha-2; any other value: dropped (unknown_country).")
    appsflyer_id: Scalar = Field(None, description="AppsFlyer device id, kept as adid.")
    idfa: Scalar = None
    advertising_id: Scalar = Field(None, description="Google advertising id, kept as gps_adid.")
    customer_user_id: Scalar = Field(None, description="The app's user id, kept as user_id.")
    event_revenue: Scalar = Field(
        None,
        description="Kept as revenue. Not a finite number (invalid_revenue), negative on a charge (negative_charge) "
        f"or above {MAX_EVENT_AMOUNT_EUR:,.0f} EUR at the latest ECB rate (amount_out_of_bounds): dropped.",
    )
    event_revenue_currency: Scalar = Field(
        None,
        description="ISO 4217, kept as currency; not a currency (unknown_currency) or without an ECB reference "
        "rate (currency_without_rate): dropped.",
    )
    media_source: Scalar = Field(None, description="Kept as network.")
    campaign: Scalar = Field(None, description="Kept as campaign: the reports group installs by it (none: organic).")
    af_adset: Scalar = Field(None, description="Kept as adgroup.")
    af_ad: Scalar = Field(None, description="Kept as creative, as the Master API's af_ad names the spend.")


@blueprint.post(f"/ingest/{VENDOR}")
@operation(
    summary="Receive one AppsFlyer Push API message",
    description="AppsFlyer's Push API (method POST): one JSON message per request, verified with the secret "
    "query parameter, normalized, deduplicated (30 days) and landed like a callback. A body that is not one "
    "JSON object is refused with 400. 500, and 503 with Retry-After while the database is unavailable, are "
    "safe to retry: nothing of the message was kept.",
    query=PushQuery,
    validate_query=False,
    body=PushMessage,
    responses={200: IngestOutcome},
    errors=(401, 500),
    security="ingestSecret",
    tags=["ingest"],
)
def receive_push(body: PushMessage) -> Response:
    app = state()
    fields = body.model_dump()
    params = query_parameters(request.query_string.decode("utf-8", "replace"))
    token = params.get("app_token") or app_token(fields)
    caller = client_address(request.remote_addr, request.headers.get("X-Forwarded-For"), app.settings.trusted_proxies)
    key = mapping_key(fields)
    # Before the secret is checked: a guess at an app's secret counts against its app token.
    rate_limits().hit("ingest_token", token or "")
    with single_event_connection(app.db) as conn:
        context = callback_context(conn, vendor=VENDOR, app_token=token, key=key)
        if not context.secret_matches(params.get("secret")) or not address_allowed(caller, context.allowlist):
            raise ApiError(401, UNVERIFIED)
        assert context.workspace_id is not None and token is not None  # secret_matches is False otherwise
        received_at = utcnow()
        event = normalize(
            fields,
            workspace_id=context.workspace_id,
            app=token,
            mapping={key or "": context.event_type} if context.event_type else {},
            received_at=received_at,
            latest_rates=fx.latest_rates(app.settings.paths),
        )
        if isinstance(event, Dropped):
            record_drop(conn, workspace_id=context.workspace_id, vendor=VENDOR, reason=event.reason, at=received_at)
            return respond(_DROPPED[event.reason])
        landed = land(conn, [event])
    return _outcome("written" if landed.written else "duplicate")
