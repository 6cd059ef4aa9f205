"""Webhook endpoints over v1 (issue 36 part 4, preview): what the dashboard and `flokit admin
webhooks` do, for API clients, and recovery after a receiver was down.

- `/v1/webhooks/endpoints` (create, list), `/v1/webhooks/endpoints/{id}` (read, change, delete),
  `…/{id}/rotate-secret`: the same `warehouse.webhooks.endpoints` functions as the CLI and the
  dashboard, with the same URL rules (HTTPS to public addresses unless the instance allows
  private ones, FLOKIT_WEBHOOKS_ALLOW_PRIVATE) and the same audit entries, the key id as actor.
  The signing secret is in two answers only: the creation's and the rotation's.
- `…/{id}/deliveries`: the endpoint's deliveries, v1-named (`transforms.webhooks.recovery`).
- `/v1/webhooks/deliveries/{id}/resend` and `…/endpoints/{id}/recover`: make deliveries due now
  (`warehouse.webhooks.recovery`) and answer 202; the Dagster drain sends them.
Read-only keys read; changes need a read-write key (403). Another workspace's ids are 404.
"""

from __future__ import annotations

from typing import Annotated, Literal

from flask import Response
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from api.auth import principal, require_key
from api.context import state
from api.errors import ApiError
from api.openapi import operation
from api.responses import respond
from api.v1 import blueprint
from api.validators import Id, path_id
from clients.dns import validate_url
from transforms.timefmt import iso_z
from transforms.webhooks.envelope import EVENT_TYPES
from transforms.webhooks.recovery import API_STATUS, ApiDeliveryStatus, disabled_reason, queue_statuses
from transforms.webhooks.urls import InvalidUrl
from warehouse.db import utcnow
from warehouse.webhooks import endpoints, recovery
from warehouse.webhooks.endpoints import Endpoint

ENDPOINT_ID = path_id()
DELIVERY_ID = path_id()
EventType = Literal[EVENT_TYPES]  # type: ignore[valid-type]
Timestamp = Annotated[str, Field(json_schema_extra={"format": "date-time"})]
# The longest URL an endpoint row holds (warehouse/webhooks/tables.py).
URL_MAX = 2048
EventTypes = Annotated[list[EventType], Field(min_length=1, max_length=len(EVENT_TYPES))]
Url = Annotated[str, Field(min_length=1, max_length=URL_MAX, description="HTTPS, resolving to public addresses.")]


class EndpointBody(BaseModel):
    """An endpoint as v1 shows it."""

    id: str
    url: str
    event_types: list[str]
    enabled: bool
    standard_webhooks: bool = Field(description="Whether sends also carry the Standard Webhooks headers.")
    created_at: Timestamp
    disabled_reason: Literal["consecutive_failures", "manual"] | None = Field(
        description="null while enabled; consecutive_failures when the sender disabled it, manual otherwise."
    )


class EndpointCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: Url
    event_types: EventTypes
    enabled: bool = True
    standard_webhooks: bool = False


class EndpointChange(BaseModel):
    """Any of the creation's fields; enabled=true also sets the failure count back to 0."""

    model_config = ConfigDict(extra="forbid")

    url: Url | None = None
    event_types: EventTypes | None = None
    enabled: bool | None = None
    standard_webhooks: bool | None = None


class EndpointWithSecret(BaseModel):
    endpoint: EndpointBody
    secret: str = Field(description="The signing secret (whsec_…): shown in this answer only.")


class OneEndpoint(BaseModel):
    endpoint: EndpointBody


class EndpointList(BaseModel):
    endpoints: list[EndpointBody]


def _body(e: Endpoint) -> EndpointBody:
    return EndpointBody(
        id=e.id,
        url=e.url,
        event_types=list(e.events),
        enabled=e.status == "enabled",
        standard_webhooks=e.standard_webhooks,
        created_at=iso_z(e.created_at) or "",
        disabled_reason=disabled_reason(e.status, e.consecutive_failures),
    )


def _instance_key() -> str:
    key = state().settings.instance_key
    if key is None:  # signing secrets are stored sealed with it (warehouse/webhooks/endpoints.py)
        raise ApiError(503, "This instance has no instance key to seal signing secrets with")
    return key


def _checked_url(url: str) -> str:
    """The URL as the CLI and the dashboard check it (form, then every address it resolves to)."""
    try:
        return validate_url(url, allow_private=state().settings.webhooks_allow_private)
    except InvalidUrl as exc:
        raise ApiError(400, f"url: {exc}") from None


@blueprint.post("/webhooks/endpoints")
@require_key(write=True)
@operation(
    summary="Add a webhook endpoint (preview)",
    description="Answers 201 with the endpoint and its signing secret, shown in this answer only. The URL must be "
    "HTTPS and resolve only to public addresses (unless the instance allows private ones).",
    body=EndpointCreate,
    responses={201: EndpointWithSecret},
    tags=["webhooks"],
)
def create_webhook_endpoint(body: EndpointCreate) -> Response:
    who = principal()
    url = _checked_url(body.url)
    with state().db.write() as conn:
        endpoint, secret = endpoints.create_endpoint(
            conn, workspace_id=who.workspace_id, url=url, events=body.event_types,
            allow_private=state().settings.webhooks_allow_private, instance_key=_instance_key(),
            standard_webhooks=body.standard_webhooks, actor=who.key_id,
        )  # fmt: skip
        if not body.enabled:
            endpoint = endpoints.set_enabled(conn, endpoint_id=endpoint.id, enabled=False, actor=who.key_id)
    return respond(
        EndpointWithSecret(endpoint=_body(endpoint), secret=secret),
        201,
        headers={"Location": f"/v1/webhooks/endpoints/{endpoint.id}"},
    )


@blueprint.get("/webhooks/endpoints")
@require_key()
@operation(
    summary="List the webhook endpoints (preview)",
    description="Every endpoint of the workspace, oldest first (there are few); never the signing secrets.",
    responses={200: EndpointList},
    tags=["webhooks"],
)
def list_webhook_endpoints() -> Response:
    with state().db.read() as conn:
        found = endpoints.list_endpoints(conn, principal().workspace_id)
    return respond(EndpointList(endpoints=[_body(e) for e in found]))


@blueprint.get("/webhooks/endpoints/<endpoint_id>")
@require_key()
@operation(
    summary="Read a webhook endpoint (preview)",
    responses={200: OneEndpoint},
    path_params={"endpoint_id": ENDPOINT_ID},
    tags=["webhooks"],
)
def read_webhook_endpoint(endpoint_id: str) -> Response:
    with state().db.read() as conn:
        endpoint = endpoints.get_endpoint(conn, workspace_id=principal().workspace_id, endpoint_id=endpoint_id)
    return respond(OneEndpoint(endpoint=_body(endpoint)))


@blueprint.patch("/webhooks/endpoints/<endpoint_id>")
@require_key(write=True)
@operation(
    summary="Change a webhook endpoint (preview)",
    description="Any of url, event_types, enabled, standard_webhooks. enabled=true sets the failure count back to 0 "
    "and resumes the waiting deliveries, as `flokit admin webhooks enable`. Queued deliveries go to the new URL "
    "with the new headers.",
    body=EndpointChange,
    responses={200: OneEndpoint},
    path_params={"endpoint_id": ENDPOINT_ID},
    tags=["webhooks"],
)
def change_webhook_endpoint(endpoint_id: str, body: EndpointChange) -> Response:
    who = principal()
    with state().db.write() as conn:
        endpoints.get_endpoint(conn, workspace_id=who.workspace_id, endpoint_id=endpoint_id)  # 404 before 400
        url = None if body.url is None else _checked_url(body.url)
        endpoint = endpoints.update_endpoint(
            conn, workspace_id=who.workspace_id, endpoint_id=endpoint_id, url=url, events=body.event_types,
            standard_webhooks=body.standard_webhooks, enabled=body.enabled,
            allow_private=state().settings.webhooks_allow_private, actor=who.key_id,
        )  # fmt: skip
    return respond(OneEndpoint(endpoint=_body(endpoint)))


@blueprint.delete("/webhooks/endpoints/<endpoint_id>")
@require_key(write=True)
@operation(
    summary="Delete a webhook endpoint (preview)",
    description="Answers the endpoint as it was. Nothing is sent to it any more: its waiting deliveries are failed "
    "('endpoint deleted'); afterwards it is 404. Its history and audit entries are kept.",
    responses={200: OneEndpoint},
    path_params={"endpoint_id": ENDPOINT_ID},
    tags=["webhooks"],
)
def delete_webhook_endpoint(endpoint_id: str) -> Response:
    who = principal()
    with state().db.write() as conn:
        endpoint = endpoints.get_endpoint(conn, workspace_id=who.workspace_id, endpoint_id=endpoint_id)
        endpoints.delete_endpoint(
            conn, workspace_id=who.workspace_id, endpoint_id=endpoint_id, now=utcnow(), actor=who.key_id
        )
    return respond(OneEndpoint(endpoint=_body(endpoint)))


@blueprint.post("/webhooks/endpoints/<endpoint_id>/rotate-secret")
@require_key(write=True)
@operation(
    summary="Rotate a webhook endpoint's signing secret (preview)",
    description="Answers the new secret, shown in this answer only; the previous one signs alongside it for 24 hours.",
    responses={200: EndpointWithSecret},
    path_params={"endpoint_id": ENDPOINT_ID},
    tags=["webhooks"],
)
def rotate_webhook_secret(endpoint_id: str) -> Response:
    who = principal()
    with state().db.write() as conn:
        endpoint = endpoints.get_endpoint(conn, workspace_id=who.workspace_id, endpoint_id=endpoint_id)
        secret, _ = endpoints.rotate_secret(
            conn, endpoint_id=endpoint_id, instance_key=_instance_key(), actor=who.key_id
        )
    return respond(EndpointWithSecret(endpoint=_body(endpoint), secret=secret))


class DeliveriesQuery(BaseModel):
    status: ApiDeliveryStatus | None = Field(
        None, description="pending (waiting or being sent), delivered (a 2xx came back) or failed (for good)."
    )
    event_type: EventType | None = Field(None, description="Only deliveries of events of this type.")
    limit: int = Field(20, ge=1, le=100, description="Page size (default 20, max 100).")
    starting_after: Id | None = Field(
        None, description="A delivery id from the previous page (its last): the page continues after it."
    )


class DeliveryBody(BaseModel):
    id: str
    event_id: str
    event_type: str
    status: ApiDeliveryStatus
    attempts: int = Field(description="Sends made so far.")
    last_attempt_at: Timestamp | None = Field(description="When the last send ended; null before the first.")
    response_status: int | None = Field(description="The last send's HTTP status; null if none came back.")


class DeliveryPage(BaseModel):
    deliveries: list[DeliveryBody]
    has_more: bool


@blueprint.get("/webhooks/endpoints/<endpoint_id>/deliveries")
@require_key()
@operation(
    summary="An endpoint's deliveries (preview)",
    description="Newest first. Page with limit and starting_after (the last id of the previous page) while has_more; "
    "400 for a starting_after that names no delivery of the endpoint.",
    query=DeliveriesQuery,
    responses={200: DeliveryPage},
    path_params={"endpoint_id": ENDPOINT_ID},
    tags=["webhooks"],
)
def list_webhook_deliveries(endpoint_id: str, query: DeliveriesQuery) -> Response:
    try:
        with state().db.read() as conn:
            endpoints.get_endpoint(conn, workspace_id=principal().workspace_id, endpoint_id=endpoint_id)
            rows, more = recovery.deliveries_page(
                conn, endpoint_id=endpoint_id,
                statuses=queue_statuses(query.status) if query.status is not None else (),
                event_type=query.event_type, limit=query.limit, starting_after=query.starting_after,
            )  # fmt: skip
    except recovery.UnknownDeliveryCursor:
        raise ApiError(400, f"starting_after: no delivery {query.starting_after} to this endpoint") from None
    return respond(
        DeliveryPage(
            deliveries=[
                DeliveryBody(
                    id=r.id,
                    event_id=r.event_id,
                    event_type=r.event_type,
                    status=API_STATUS[r.status],
                    attempts=r.attempts,
                    last_attempt_at=iso_z(r.last_attempt_at),
                    response_status=r.response_status,
                )
                for r in rows
            ],
            has_more=more,
        )
    )


class Accepted(BaseModel):
    status: Literal["queued"]
    deliveries: list[str] = Field(description="The deliveries made due now (each is sent once, within seconds).")


@blueprint.post("/webhooks/deliveries/<delivery_id>/resend")
@require_key(write=True)
@operation(
    summary="Resend one delivery (preview)",
    description="Whatever its status: one more send now of the same frozen body and event id, with the next attempt "
    "number and a fresh signature. Not counted in the endpoint's failure streak; if it fails the delivery keeps "
    "the status it had (a pending one goes on with its retries). 409 while a send of it is under way. To a "
    "disabled endpoint it waits until the endpoint is enabled.",
    responses={202: Accepted},
    errors=(409,),
    path_params={"delivery_id": DELIVERY_ID},
    tags=["webhooks"],
)
def resend_webhook_delivery(delivery_id: str) -> Response:
    who = principal()
    with state().db.write() as conn:
        recovery.resend(conn, workspace_id=who.workspace_id, delivery_id=delivery_id, now=utcnow(), actor=who.key_id)
    return respond(Accepted(status="queued", deliveries=[delivery_id]), 202)


class RecoverRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    since: AwareDatetime = Field(description="ISO 8601 with an offset: events created at or after it.")

    @field_validator("since", mode="before")
    @classmethod
    def _text(cls, since: object) -> object:
        """ISO 8601 text only: pydantic would also read a number as Unix time."""
        if not isinstance(since, str):
            raise ValueError("since: an ISO 8601 date and time with an offset, e.g. 2026-11-28T00:00:00Z")
        return since


@blueprint.post("/webhooks/endpoints/<endpoint_id>/recover")
@require_key(write=True)
@operation(
    summary="Recover an endpoint's undelivered events (preview)",
    description="Every event since `since` whose delivery to this endpoint is not delivered (failed for good, or "
    "still waiting: a retry, never attempted) is sent now, once: a waiting retry is replaced, not doubled. "
    "Idempotent: a repeat while they are still due changes nothing (answers no deliveries). Test samples are not "
    "recovered. Not counted in the failure streak; to a disabled endpoint they wait until it is enabled.",
    body=RecoverRequest,
    responses={202: Accepted},
    path_params={"endpoint_id": ENDPOINT_ID},
    tags=["webhooks"],
)
def recover_webhook_endpoint(endpoint_id: str, body: RecoverRequest) -> Response:
    who = principal()
    with state().db.write() as conn:
        ids = recovery.recover(
            conn, workspace_id=who.workspace_id, endpoint_id=endpoint_id, since=body.since, now=utcnow(),
            actor=who.key_id,
        )  # fmt: skip
    return respond(Accepted(status="queued", deliveries=ids), 202)
