"""POST /v1/events: one product or revenue event, landed like an ingest callback (source "api")."""

from __future__ import annotations

from typing import Any, Literal

from flask import Response
from pydantic import BaseModel, ConfigDict, Field

from api.auth import principal, require_key
from api.context import state
from api.errors import ApiError
from api.openapi import operation
from api.responses import respond
from api.v1 import blueprint
from api.validators import JsonObject, LakeTimestamp
from transforms.api_events import api_event
from transforms.ingest.validation import MAX_EVENT_AMOUNT_EUR, money_problem, parse_amount, valid_country
from transforms.timefmt import parse_iso8601
from warehouse import fx
from warehouse.db import utcnow
from warehouse.events import landing

# Same limits as the landed_events / event_claims columns.
NAME_PATTERN = r"^[A-Za-z0-9_.:-]+$"


class EventBody(BaseModel):
    model_config = ConfigDict(strict=True)

    event: str = Field(min_length=1, max_length=64, pattern=NAME_PATTERN, description="Event name, e.g. trial_start.")
    user_id: str = Field(min_length=1, max_length=200, description="FloKit-side user id.")
    timestamp: LakeTimestamp = Field(
        description="ISO 8601; no offset means UTC; from 2024-01-01 to one day ahead of now.",
    )
    properties: JsonObject = Field(
        default_factory=dict, description="e.g. campaign_id, creative_id, product_id, price, currency."
    )
    event_id: str | None = Field(
        None,
        min_length=1,
        max_length=80,
        pattern=NAME_PATTERN,
        description="Your id for this event: resending it answers duplicate. Omitted: derived from the content.",
    )


class EventAccepted(BaseModel):
    event_id: str
    status: Literal["accepted", "duplicate"]


def _check_codes_and_amount(event: str, properties: dict[str, Any]) -> None:
    """The ingest rules for a country, a currency and an amount (`transforms.ingest.validation`),
    answered 400 here (the caller is there to read why) where a vendor callback is dropped."""
    country = properties.get("country")
    if country is not None and not (isinstance(country, str) and valid_country(country.upper())):
        raise ApiError(400, "properties.country: not an ISO 3166-1 alpha-2 country code (unknown_country)")
    currency = properties.get("currency")
    if currency is not None and not isinstance(currency, str):
        raise ApiError(400, "properties.currency: not an ISO 4217 currency code (unknown_currency)")
    revenue = properties.get("revenue")
    amount = parse_amount(revenue) if revenue is not None else None
    if revenue is not None and amount is None:
        raise ApiError(400, "properties.revenue: not a number (invalid_revenue)")
    problem = money_problem(
        event, amount, currency.upper() if currency else None, fx.latest_rates(state().settings.paths)
    )
    if problem is not None:
        raise ApiError(400, f"properties: {_PROBLEMS[problem]} ({problem})")


_PROBLEMS = {
    "unknown_currency": "currency is not an ISO 4217 currency code",
    "currency_without_rate": "currency has no ECB reference rate, so no report could convert it",
    "invalid_revenue": "revenue is not a finite number",
    "negative_charge": "revenue of a charge is negative (a refund is its own event)",
    "amount_out_of_bounds": f"revenue is above {MAX_EVENT_AMOUNT_EUR:,.0f} EUR, the bound of one event",
}


@blueprint.post("/events")
@require_key(write=True)
@operation(
    summary="Send one event",
    description="202 {event_id, status: accepted}; the same event again (same event_id, or same content "
    "without one) answers 202 with status duplicate and is not landed twice.",
    body=EventBody,
    responses={202: EventAccepted},
    tags=["events"],
)
def send_event(body: EventBody) -> Response:
    _check_codes_and_amount(body.event, body.properties)
    event = api_event(
        workspace_id=principal().workspace_id,
        event=body.event,
        user_id=body.user_id,
        occurred_at=parse_iso8601(body.timestamp),
        properties=body.properties,
        received_at=utcnow(),
        event_id=body.event_id,
    )
    with state().db.write() as conn:
        result = landing.land(conn, [event])
    status = "accepted" if result.written else "duplicate"
    return respond(EventAccepted(event_id=event.event_id, status=status), 202)
