"""Webhook endpoints from a browser (Svix-like): list, add, send a test event, the delivery
history and each delivery's attempts and frozen body, re-enable, rotate the signing secret, and
(issue 36 part 4) resend a delivery, recover everything not delivered since a time, switch the
Standard Webhooks headers.

The same `warehouse.webhooks` functions as `flokit admin webhooks` and `POST /v1/webhooks/test`,
with the signed-in operator's email as the audit actor; every endpoint id and delivery id from the
address is looked up within the operator's workspace first (another workspace's is a 404 page).
An endpoint's URL is checked as the CLI checks it: HTTPS to public addresses, unless the instance
allows private addresses (FLOKIT_WEBHOOKS_ALLOW_PRIVATE). A test event is only queued here; the
Dagster sensor sends it like any other, so it shows up in the history. A new signing secret is
shown once, in the answer to the POST (pages are `no-store`). Resend and recover are v1's
(`warehouse.webhooks.recovery`): they make deliveries due now and the drain sends them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from flask import Response, g, redirect, request, url_for
from flask.typing import ResponseReturnValue
from pydantic import BaseModel, BeforeValidator, Field, ValidationError, ValidationInfo, field_validator

from api.context import state
from api.dashboard import blueprint
from api.dashboard.forms import Checkbox, DashboardForm, Stripped, checking, read_form, refuse
from api.dashboard.pages import bad_query, error_page, page, paging
from clients.dns import validate_url
from transforms.timefmt import iso_z
from transforms.webhooks.backoff import DISABLE_AFTER_FAILURES, RETRY_DELAYS_S
from transforms.webhooks.envelope import EVENT_TYPES
from transforms.webhooks.urls import InvalidUrl
from warehouse.db import utcnow
from warehouse.webhooks import delivery_history, endpoints, recovery
from warehouse.webhooks.endpoints import ROTATION_OVERLAP, Endpoint
from warehouse.webhooks.outbox import emit_test_event
from warehouse.webhooks.tables import DELIVERY_STATUSES

PAGE_SIZE = 25
MAX_PAGE = 100
VERBS = {
    "test": "Send test event",
    "enable": "Re-enable",
    "rotate-secret": "Rotate signing secret",
    "recover": "Recover since…",
    "standard-webhooks": "Standard Webhooks headers…",
}
# The view each verb's form posts to.
ACTIONS = {
    "test": "dashboard.send_test",
    "enable": "dashboard.enable_endpoint",
    "rotate-secret": "dashboard.rotate_endpoint_secret",
    "recover": "dashboard.recover_endpoint",
    "standard-webhooks": "dashboard.switch_standard_webhooks",
}
NOTICES = {
    "enabled": "Endpoint enabled: its failure count is back to 0 and its waiting deliveries are sent again.",
    "test": "Test event queued: it is sent within seconds and appears in the history below.",
    "standard-on": "Standard Webhooks headers on: every send from now on carries them, retries included.",
    "standard-off": "Standard Webhooks headers off: sends from now on carry Service-Signature only.",
    "resent": "Resend queued: it is sent within seconds and appears in the attempts below.",
}


class HistoryQuery(BaseModel):
    """The delivery history's filters and page (limit/offset as v1's lists)."""

    status: str | None = Field(None, pattern="^(" + "|".join(DELIVERY_STATUSES) + ")$")
    event_type: str | None = Field(None, pattern="^(" + "|".join(t.replace(".", r"\.") for t in EVENT_TYPES) + ")$")
    limit: int = Field(PAGE_SIZE, ge=1, le=MAX_PAGE)
    offset: int = Field(0, ge=0, le=1_000_000)


def _sentence(refusal: ValueError) -> str:
    """A refusal's message as the form shows it beside the field: capitalised, with a full stop."""
    text = str(refusal)
    return text[:1].upper() + text[1:] + "."


class EndpointForm(DashboardForm):
    """The add form: the URL (checked as the CLI checks it), the events ticked, the header flavour."""

    url: Stripped = ""
    events: Annotated[list[str], BeforeValidator(lambda chosen: [e for e in chosen if e])] = []
    standard_webhooks: Checkbox = False

    @field_validator("url")
    @classmethod
    def _acceptable(cls, url: str, info: ValidationInfo) -> str:
        if not checking(info):
            return url
        if not url:
            raise refuse("Give the endpoint's URL.")
        try:
            validate_url(url, allow_private=bool((info.context or {}).get("allow_private")))
        except InvalidUrl as exc:
            raise refuse(_sentence(exc)) from None
        return url

    @field_validator("events")
    @classmethod
    def _known(cls, events: list[str], info: ValidationInfo) -> list[str]:
        if checking(info):
            try:
                endpoints.parse_events(events)
            except ValueError as exc:
                raise refuse(_sentence(exc)) from None
        return events


class TestEventForm(DashboardForm):
    """The send-test form: which event type the sample is."""

    event_type: str = ""

    @field_validator("event_type")
    @classmethod
    def _known(cls, event_type: str, info: ValidationInfo) -> str:
        if checking(info) and event_type not in EVENT_TYPES:
            raise refuse("Choose one of the event types.")
        return event_type


class RecoverForm(DashboardForm):
    """The recover form: from when (a browser's date-time field, read as UTC, or ISO 8601 with an offset)."""

    since: Stripped = ""

    @field_validator("since")
    @classmethod
    def _instant(cls, since: str, info: ValidationInfo) -> str:
        if checking(info) and _since(since) is None:
            raise refuse("Give the time as YYYY-MM-DD HH:MM (UTC).")
        return since


def _since(text: str) -> datetime | None:
    """The instant a recover form names: a time without an offset is UTC (the page says so)."""
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        return None
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at


class StandardWebhooksForm(DashboardForm):
    """The switch: ticked sends the Standard Webhooks headers too."""

    standard_webhooks: Checkbox = False


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
    allow_private = state().settings.webhooks_allow_private
    form = read_form(EndpointForm, allow_private=allow_private)
    if form.errors:
        return _list(400, form=form.values.model_dump(), errors=form.errors)
    with state().db.write() as conn:
        endpoint, secret = endpoints.create_endpoint(
            conn,
            workspace_id=g.workspace_id,
            url=form.values.url,
            events=form.values.events,
            allow_private=allow_private,
            instance_key=_instance_key(),
            standard_webhooks=form.values.standard_webhooks,
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
        found, total = delivery_history.page_of_deliveries(
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
        actions=ACTIONS,
        # The recover form's default: a day back, as a browser's date-time field writes it.
        recover_default=f"{utcnow() - timedelta(days=1):%Y-%m-%dT%H:%M}",
        # The dialog says until when both secrets would sign if the operator confirmed now.
        overlap_until=iso_z(utcnow() + ROTATION_OVERLAP),
        overlap_hours=int(ROTATION_OVERLAP.total_seconds() // 3600),
        **extra,
    )


@blueprint.get("/webhooks/<endpoint_id>")
def webhook(endpoint_id: str) -> Response:
    done = request.args.get("done", "")
    notice = NOTICES.get(done)
    if done == "recovered":
        count = request.args.get("count", "0")
        notice = (
            f"Recovery queued: {count} deliver{'y' if count == '1' else 'ies'} not delivered since "
            f"{request.args.get('since', '')} will be sent within seconds, once each"
            + ("." if request.args.get("waiting") != "1" else ", when the endpoint is re-enabled.")
        )
    return _detail(endpoint_id, notice=notice, queued=request.args.get("delivery") if done == "test" else None)


@blueprint.get("/webhooks/<endpoint_id>/confirm/<verb>")
def confirm_webhook(endpoint_id: str, verb: str) -> Response:
    """Without JavaScript the dialogs cannot open: their triggers lead here, to the same form."""
    if verb not in VERBS:
        return error_page(404, f"No such page: {request.path}")
    return _detail(endpoint_id, confirm=verb)


@blueprint.post("/webhooks/<endpoint_id>/test")
def send_test(endpoint_id: str) -> ResponseReturnValue:
    form = read_form(TestEventForm)
    with state().db.write() as conn:
        endpoint = endpoints.get_endpoint(conn, workspace_id=g.workspace_id, endpoint_id=endpoint_id)  # 404 first
        problem = form.errors.get("event_type")
        if problem is None and endpoint.status != "enabled":
            problem = "This endpoint is disabled: re-enable it first (a test event is sent now or never)."
        if problem is None:
            emitted = emit_test_event(
                conn, workspace_id=g.workspace_id, event_type=form.values.event_type, endpoint_id=endpoint_id
            )
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


@blueprint.post("/webhooks/<endpoint_id>/recover")
def recover_endpoint(endpoint_id: str) -> ResponseReturnValue:
    """Everything not delivered since the time given, sent now once each (v1's recover)."""
    form = read_form(RecoverForm)
    with state().db.write() as conn:
        endpoint = endpoints.get_endpoint(conn, workspace_id=g.workspace_id, endpoint_id=endpoint_id)  # 404 first
        since = None if form.errors else _since(form.values.since)
        if since is not None:
            ids = recovery.recover(
                conn, workspace_id=g.workspace_id, endpoint_id=endpoint_id, since=since, now=utcnow(), actor=g.operator
            )
    if since is None:
        return _detail(endpoint_id, 400, confirm="recover", form_error=form.errors.get("since"))
    return redirect(
        url_for(
            "dashboard.webhook",
            endpoint_id=endpoint_id,
            done="recovered",
            count=len(ids),
            since=f"{since.astimezone(UTC):%Y-%m-%d %H:%M} UTC",
            waiting="1" if endpoint.status != "enabled" else None,
        ),
        303,
    )


@blueprint.post("/webhooks/<endpoint_id>/standard-webhooks")
def switch_standard_webhooks(endpoint_id: str) -> ResponseReturnValue:
    form = read_form(StandardWebhooksForm)
    on = form.values.standard_webhooks
    with state().db.write() as conn:
        endpoints.update_endpoint(
            conn,
            workspace_id=g.workspace_id,
            endpoint_id=endpoint_id,
            standard_webhooks=on,
            allow_private=state().settings.webhooks_allow_private,
            actor=g.operator,
        )  # another workspace's endpoint: NotFound, 404
    return redirect(
        url_for("dashboard.webhook", endpoint_id=endpoint_id, done="standard-on" if on else "standard-off"), 303
    )


def _delivery_page(endpoint_id: str, delivery_id: str, status: int = 200, **extra: Any) -> Response:
    with state().db.read() as conn:
        endpoint = endpoints.get_endpoint(conn, workspace_id=g.workspace_id, endpoint_id=endpoint_id)  # 404
        found = delivery_history.delivery_detail(conn, endpoint_id=endpoint_id, delivery_id=delivery_id)  # 404
    return page(
        "dashboard/webhooks/delivery.html",
        status,
        title=f"Delivery {delivery_id}",
        section="webhooks",
        endpoint=endpoint,
        d=found,
        **extra,
    )


@blueprint.get("/webhooks/<endpoint_id>/deliveries/<delivery_id>")
def delivery(endpoint_id: str, delivery_id: str) -> Response:
    return _delivery_page(endpoint_id, delivery_id, notice=NOTICES.get(request.args.get("done", "")))


@blueprint.post("/webhooks/<endpoint_id>/deliveries/<delivery_id>/resend")
def resend_delivery(endpoint_id: str, delivery_id: str) -> ResponseReturnValue:
    """One more send of this delivery now (v1's resend); 409 while a drain is sending it."""
    try:
        with state().db.write() as conn:
            endpoints.get_endpoint(conn, workspace_id=g.workspace_id, endpoint_id=endpoint_id)  # 404
            delivery_history.delivery_detail(conn, endpoint_id=endpoint_id, delivery_id=delivery_id)  # 404
            recovery.resend(conn, workspace_id=g.workspace_id, delivery_id=delivery_id, now=utcnow(), actor=g.operator)
    except recovery.SendUnderWay as exc:
        return _delivery_page(endpoint_id, delivery_id, 409, notice=str(exc) + ".", notice_is_error=True)
    return redirect(url_for("dashboard.delivery", endpoint_id=endpoint_id, delivery_id=delivery_id, done="resent"), 303)
