"""GET|POST /ingest/<vendor>: one attribution callback -> one ingest outcome.

The hot path is one query (credential, mapping entry, allowlist), then for an accepted event
the dedup claim and the landed row (`landing.land`), atomically: in one transaction on SQLite,
in one statement on PostgreSQL (`landing.single_event_connection`). A failure in the write
keeps neither and the error handler answers 500 `Internal Server Error` (503 `Service
Unavailable` with Retry-After when the database is unavailable), so the vendor's retry is
processed afresh and counts as `written`, never as `duplicate`.
"""

from __future__ import annotations

from flask import Response, request
from pydantic import BaseModel, ConfigDict, Field

from api.context import state
from api.errors import ApiError
from api.ingest import blueprint
from api.openapi import operation
from api.ratelimits import rate_limits
from api.responses import respond
from transforms.ingest.attribution import ADAPTERS, DROP_REASONS, Dropped, mapping_key, normalize
from transforms.ingest.network import address_allowed, client_address
from transforms.ingest.query import query_parameters
from transforms.ingest.validation import MAX_EVENT_AMOUNT_EUR
from warehouse import fx
from warehouse.db import utcnow
from warehouse.events.landing import land, single_event_connection
from warehouse.ingest.repository import callback_context, record_drop

UNVERIFIED = "Unverified callback."
# Vendors whose callbacks carry query or form parameters (AppsFlyer's Push API: api/ingest/push.py).
CALLBACK_VENDORS = {vendor: a for vendor, a in ADAPTERS.items() if a.delivery == "callback"}


class CallbackParameters(BaseModel):
    """The attribution provider's callback parameters (spec "Measurement ingest"); the shared
    `secret` is the `ingestSecret` security scheme. Documented, not validated: a bad value is
    dropped or ignored by normalization and counted in the outcome, never answered with 400."""

    model_config = ConfigDict(extra="allow")

    app_token: str = Field(description="Vendor app token; maps to the workspace server-side.")
    event_token: str | None = Field(None, description="Vendor event token, mapped to a canonical event type.")
    activity_kind: str | None = Field(None, description="install, reattribution, event, ...")
    created_at: str | None = Field(None, description="Unix seconds or ISO 8601; missing or invalid: dropped.")
    os_name: str | None = Field(None, description="Normalized to ios or android.")
    country: str | None = Field(None, description="ISO 3166-1 alpha-2; any other value: dropped (unknown_country).")
    adid: str | None = None
    idfa: str | None = None
    gps_adid: str | None = None
    revenue: str | None = Field(
        None,
        description="Decimal number, kept in properties. Not a finite number (invalid_revenue), negative on a "
        f"charge (negative_charge) or above {MAX_EVENT_AMOUNT_EUR:,.0f} EUR at the latest ECB rate "
        "(amount_out_of_bounds): dropped.",
    )
    currency: str | None = Field(
        None,
        description="ISO 4217, kept in properties; not a currency (unknown_currency) or without an ECB reference "
        "rate (currency_without_rate): dropped. Absent: the workspace's reporting currency.",
    )
    network_name: str | None = Field(None, description="Attribution network, kept in properties as `network`.")
    campaign_name: str | None = Field(
        None, description="Attribution campaign, kept as `campaign`: the reports group installs by it (none: organic)."
    )
    adgroup_name: str | None = Field(None, description="Attribution ad group, kept as `adgroup`.")
    creative_name: str | None = Field(None, description="Attribution creative, kept as `creative`.")
    tracker_name: str | None = Field(
        None, description="network::campaign::adgroup::creative; fills the levels the *_name parameters leave out."
    )
    user_id: str | None = Field(None, description="FloKit-side user id (partner parameter).")
    event_id: str | None = Field(None, description="Optional unique id of the callback (stable deduplication id).")


class IngestOutcome(BaseModel):
    """Spec "Ingest outcome": one callback received, and what became of it."""

    model_config = ConfigDict(frozen=True)  # three constant answers, serialized once (api/responses.py)

    received: int
    written: int
    duplicate: int
    dropped: int
    # Beyond the spec (clients ignore unknown fields): why a dropped callback was dropped, so a
    # vendor's test callback shows what to fix. Absent from the other outcomes.
    reason: str | None = Field(
        None,
        exclude_if=lambda value: value is None,
        description="Only when dropped: " + ", ".join(DROP_REASONS) + ".",
    )


def _params() -> dict[str, str]:
    """Query string, then (POST) the form body; a body value wins over the same query name, and
    the first of a repeated name wins (as `MultiDict.to_dict`). A value holding NUL is no value
    (no database text column can store it): without it the callback is verified, mapped or
    dropped like any other. The query string is parsed straight into a dict (`query_parameters`):
    the request's `args` MultiDict is built for repeated names this endpoint never reads."""
    params = query_parameters(request.query_string.decode("utf-8", "replace"))
    if request.method == "POST":
        params.update(request.form.to_dict(flat=True))
    return {name: value for name, value in params.items() if "\x00" not in value}


# The only three outcomes of one callback.
_OUTCOMES = {
    kind: IngestOutcome.model_validate({"received": 1, "written": 0, "duplicate": 0, "dropped": 0, kind: 1})
    for kind in ("written", "duplicate", "dropped")
}


def _outcome(kind: str) -> Response:
    return respond(_OUTCOMES[kind])


# One constant answer per drop reason, as for the outcomes above.
_DROPPED = {
    reason: IngestOutcome(received=1, written=0, duplicate=0, dropped=1, reason=reason) for reason in DROP_REASONS
}


@blueprint.route("/ingest/<vendor>", methods=["GET", "POST"])
@operation(
    summary="Receive one attribution callback",
    description="One callback per request: GET with query parameters, or POST with them in the query "
    "string or a form-encoded body. Normalized, deduplicated (30 days) and landed for the warehouse. "
    "500, and 503 with Retry-After while the database is unavailable, are safe to retry: nothing of the "
    "callback was kept.",
    query=CallbackParameters,
    validate_query=False,
    responses={200: IngestOutcome},
    errors=(401, 500),
    security="ingestSecret",
    tags=["ingest"],
    path_params={"vendor": {"type": "string", "enum": sorted(CALLBACK_VENDORS)}},
)
def receive_callback(vendor: str) -> Response:
    adapter = CALLBACK_VENDORS.get(vendor)
    if adapter is None:  # a push vendor has its own route (POST with a JSON body): no callback adapter
        raise ApiError(404, f"Unknown vendor: {vendor}")
    app = state()
    params = _params()
    caller = client_address(request.remote_addr, request.headers.get("X-Forwarded-For"), app.settings.trusted_proxies)
    key = mapping_key(params)
    # Before the secret is checked: a guess at an app's secret counts against its app token.
    rate_limits().hit("ingest_token", params.get("app_token") or "")
    # Lookup, then (for an accepted event) claim + landed row, atomically: one transaction on
    # SQLite, one statement on PostgreSQL. A failure leaves no claim (401/drop write nothing).
    with single_event_connection(app.db) as conn:
        context = callback_context(conn, vendor=vendor, app_token=params.get("app_token"), key=key)
        if not context.secret_matches(params.get("secret")) or not address_allowed(caller, context.allowlist):
            raise ApiError(401, UNVERIFIED)
        assert context.workspace_id is not None  # secret_matches is False for unknown app tokens
        mapping = {key or "": context.event_type} if context.event_type else {}
        received_at = utcnow()
        event = normalize(
            params,
            adapter=adapter,
            workspace_id=context.workspace_id,
            mapping=mapping,
            received_at=received_at,
            latest_rates=fx.latest_rates(app.settings.paths),
        )
        if isinstance(event, Dropped):
            record_drop(conn, workspace_id=context.workspace_id, vendor=vendor, reason=event.reason, at=received_at)
            return respond(_DROPPED[event.reason])
        landed = land(conn, [event])
    return _outcome("written" if landed.written else "duplicate")
