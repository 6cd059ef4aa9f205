"""Webhook endpoints from a browser (Svix-like): list, add, send a test event, the delivery
history and each delivery's attempts and frozen body, re-enable, rotate the signing secret.

The same `warehouse.webhooks` functions as `flokit admin webhooks` and `POST /v1/webhooks/test`,
with the signed-in operator's email as the audit actor; every endpoint id and delivery id from the
address is looked up within the operator's workspace first (another workspace's is a 404 page).
An endpoint's URL is checked as the CLI checks it: HTTPS to public addresses, unless the instance
allows private addresses (FLOKIT_WEBHOOKS_ALLOW_PRIVATE). A test event is only queued here; the
Dagster sensor sends it like any other, so it shows up in the history. A new signing secret is
shown once, in the answer to the POST (pages are `no-store`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from flask import Response, g, redirect, request, url_for
from flask.typing import ResponseReturnValue
from pydantic import BaseModel, Field, ValidationError

from api.context import state
from api.dashboard import blueprint
from api.dashboard.pages import bad_query, error_page, page, paging
from clients.dns import validate_url
from transforms.timefmt import iso_z
from transforms.webhooks.backoff import DISABLE_AFTER_FAILURES, RETRY_DELAYS_S
from transforms.webhooks.envelope import EVENT_TYPES
from transforms.webhooks.urls import InvalidUrl
from warehouse.db import utcnow
from warehouse.webhooks import deliveries, endpoints
from warehouse.webhooks.endpoints import ROTATION_OVERLAP, Endpoint
from warehouse.webhooks.outbox import emit_test_event
from warehouse.webhooks.tables import DELIVERY_STATUSES

PAGE_SIZE = 25
MAX_PAGE = 100
VERBS = {"test": "Send test event", "enable": "Re-enable", "rotate-secret": "Rotate signing secret"}
NOTICES = {
    "enabled": "Endpoint enabled: its failure count is back to 0 and its waiting deliveries are sent again.",
    "test": "Test event queued: it is sent within seconds and appears in the history below.",
}


class HistoryQuery(BaseModel):
    """The delivery history's filters and page (limit/offset as v1's lists)."""

    status: str | None = Field(None, pattern="^(" + "|".join(DELIVERY_STATUSES) + ")$")
    event_type: str | None = Field(None, pattern="^(" + "|".join(t.replace(".", r"\.") for t in EVENT_TYPES) + ")$")
    limit: int = Field(PAGE_SIZE, ge=1, le=MAX_PAGE)
    offset: int = Field(0, ge=0, le=1_000_000)


def _hm(at: datetime | None) -> str:
    return "" if at is None else f"{at:%Y-%m-%d %H:%M} UTC"


def status_text(e: Endpoint) -> str:
    """Enabled, or disabled and why: after the sender's failure streak, or by an operator."""
    if e.status == "enabled":
        return "enabled"
    if e.consecutive_failures >= DISABLE_AFTER_FAILURES:
        return f"disabled — {e.consecutive_failures} consecutive failures, since {_hm(e.disabled_at)}"
    return f"disabled by an operator since {_hm(e.disabled_at)}" if e.disabled_at else "disabled"


def _endpoint_row(e: Endpoint) -> dict[str, Any]:
    return {"endpoint": e, "status_text": status_text(e), "created": iso_z(e.created_at)}


def _list(status: int = 200, **extra: Any) -> Response:
    with state().db.read() as conn:
        found = endpoints.list_endpoints(conn, g.workspace_id)
    form = extra.pop("form", {"url": "", "events": [], "standard_webhooks": False})
    return page(
        "dashboard/webhooks/list.html",
        status,
        title="Webhooks",
        section="webhooks",
        rows=[_endpoint_row(e) for e in found],
        event_types=EVENT_TYPES,
        allow_private=state().settings.webhooks_allow_private,
        retries=len(RETRY_DELAYS_S),
        disable_after=DISABLE_AFTER_FAILURES,
        form=form,
        errors=extra.pop("errors", {}),
        **extra,
    )


@blueprint.get("/webhooks")
def webhooks() -> Response:
    return _list()


@blueprint.post("/webhooks")
def add_endpoint() -> Response:
    url = request.form.get("url", "").strip()
    chosen = [e for e in request.form.getlist("events") if e]
    standard = request.form.get("standard_webhooks") == "on"
    form = {"url": url, "events": chosen, "standard_webhooks": standard}
    errors: dict[str, str] = {}
    allow_private = state().settings.webhooks_allow_private
    if not url:
        errors["url"] = "Give the endpoint's URL."
    else:
        try:
            validate_url(url, allow_private=allow_private)
        except InvalidUrl as exc:
            errors["url"] = str(exc)[:1].upper() + str(exc)[1:] + "."
    try:
        endpoints.parse_events(chosen)
    except ValueError as exc:
        errors["events"] = str(exc)[:1].upper() + str(exc)[1:] + "."
    if errors:
        return _list(400, form=form, errors=errors)
    with state().db.write() as conn:
        endpoint, secret = endpoints.create_endpoint(
            conn,
            workspace_id=g.workspace_id,
            url=url,
            events=chosen,
            allow_private=allow_private,
            instance_key=_instance_key(),
            standard_webhooks=standard,
            actor=g.operator,
        )
    return _detail(endpoint.id, 201, new_secret=secret, shown_because="added")


def _instance_key() -> str:
    """The key signing secrets are sealed with; the dashboard serves nothing without one (auth.py)."""
    key = state().settings.instance_key
    assert key is not None, "the dashboard's before_request refuses every page without the instance key"
    return key


def _detail(endpoint_id: str, status: int = 200, **extra: Any) -> Response:
    try:
        query = HistoryQuery.model_validate(
            {k: v for k, v in request.args.items() if k in HistoryQuery.model_fields and v != ""}
        )
    except ValidationError as exc:
        return bad_query(exc)
    with state().db.read() as conn:
        endpoint = endpoints.get_endpoint(conn, workspace_id=g.workspace_id, endpoint_id=endpoint_id)  # 404
        found, total = deliveries.page_of_deliveries(
            conn,
            endpoint_id=endpoint_id,
            status=query.status,
            event_type=query.event_type,
            limit=query.limit,
            offset=query.offset,
        )
    filters = {k: v for k, v in (("status", query.status), ("event_type", query.event_type)) if v}
    return page(
        "dashboard/webhooks/endpoint.html",
        status,
        title=f"Webhook endpoint {endpoint.url}",
        section="webhooks",
        endpoint=endpoint,
        status_text=status_text(endpoint),
        created=iso_z(endpoint.created_at),
        rows=found,
        total=total,
        query=query,
        filtered=bool(filters),
        **paging(
            url_for("dashboard.webhook", endpoint_id=endpoint_id),
            filters,
            query,
            page_size=PAGE_SIZE,
            shown=len(found),
            total=total,
        ),
        statuses=DELIVERY_STATUSES,
        event_types=EVENT_TYPES,
        verbs=VERBS,
        # The dialog says until when both secrets would sign if the operator confirmed now.
        overlap_until=iso_z(utcnow() + ROTATION_OVERLAP),
        overlap_hours=int(ROTATION_OVERLAP.total_seconds() // 3600),
        **extra,
    )


@blueprint.get("/webhooks/<endpoint_id>")
def webhook(endpoint_id: str) -> Response:
    done = request.args.get("done", "")
    return _detail(
        endpoint_id, notice=NOTICES.get(done), queued=request.args.get("delivery") if done == "test" else None
    )


@blueprint.get("/webhooks/<endpoint_id>/confirm/<verb>")
def confirm_webhook(endpoint_id: str, verb: str) -> Response:
    """Without JavaScript the dialogs cannot open: their triggers lead here, to the same form."""
    if verb not in VERBS:
        return error_page(404, f"No such page: {request.path}")
    return _detail(endpoint_id, confirm=verb)


@blueprint.post("/webhooks/<endpoint_id>/test")
def send_test(endpoint_id: str) -> ResponseReturnValue:
    event_type = request.form.get("event_type", "")
    with state().db.write() as conn:
        endpoint = endpoints.get_endpoint(conn, workspace_id=g.workspace_id, endpoint_id=endpoint_id)  # 404
        problem = None
        if event_type not in EVENT_TYPES:
            problem = "Choose one of the event types."
        elif endpoint.status != "enabled":
            problem = "This endpoint is disabled: re-enable it first (a test event is sent now or never)."
        else:
            emitted = emit_test_event(conn, workspace_id=g.workspace_id, event_type=event_type, endpoint_id=endpoint_id)
    if problem is not None:
        return _detail(endpoint_id, 400 if endpoint.status == "enabled" else 409, confirm="test", form_error=problem)
    delivery_id = emitted.deliveries[0][0]
    return redirect(url_for("dashboard.webhook", endpoint_id=endpoint_id, done="test", delivery=delivery_id), 303)


@blueprint.post("/webhooks/<endpoint_id>/enable")
def enable_endpoint(endpoint_id: str) -> ResponseReturnValue:
    with state().db.write() as conn:
        endpoint = endpoints.get_endpoint(conn, workspace_id=g.workspace_id, endpoint_id=endpoint_id)  # 404
        if endpoint.status != "enabled":
            endpoints.set_enabled(conn, endpoint_id=endpoint_id, enabled=True, actor=g.operator)
    if endpoint.status == "enabled":
        return _detail(
            endpoint_id, 409, notice="This endpoint is already enabled: someone enabled it first.", notice_is_error=True
        )
    return redirect(url_for("dashboard.webhook", endpoint_id=endpoint_id, done="enabled"), 303)


@blueprint.post("/webhooks/<endpoint_id>/rotate-secret")
def rotate_endpoint_secret(endpoint_id: str) -> Response:
    with state().db.write() as conn:
        endpoints.get_endpoint(conn, workspace_id=g.workspace_id, endpoint_id=endpoint_id)  # 404
        secret, expires = endpoints.rotate_secret(
            conn, endpoint_id=endpoint_id, instance_key=_instance_key(), actor=g.operator
        )
    return _detail(endpoint_id, new_secret=secret, shown_because="rotated", previous_expires=iso_z(expires))


@blueprint.get("/webhooks/<endpoint_id>/deliveries/<delivery_id>")
def delivery(endpoint_id: str, delivery_id: str) -> Response:
    with state().db.read() as conn:
        endpoint = endpoints.get_endpoint(conn, workspace_id=g.workspace_id, endpoint_id=endpoint_id)  # 404
        found = deliveries.delivery_detail(conn, endpoint_id=endpoint_id, delivery_id=delivery_id)  # 404
    return page(
        "dashboard/webhooks/delivery.html",
        title=f"Delivery {delivery_id}",
        section="webhooks",
        endpoint=endpoint,
        d=found,
    )
