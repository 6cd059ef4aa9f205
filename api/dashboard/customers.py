"""Customers from a browser (issue 34, preview): the support agent's search, the customer page and
promotional access.

The same functions as `/v1/customers`: `warehouse.customers.search` for the search box and
`warehouse.customers.customer` for the page (one computation behind both surfaces, so the page
and the API never disagree), `grant_promotional` / `end_promotional` for the two verbs, with the
signed-in operator's email as the audit actor (as every dashboard verb records it; v1 records the
API key's id). Every decision (statuses, the timeline's order and page, a grant's end, a duration)
is `transforms.customers`'.

The search is a GET form (an id in the address is what support pastes into a ticket); one hit goes
straight to the customer (303), none offers to open the id as a user id (a user known only from
events has no grant to be found by: docs/spec-decisions.md). The grant and End verbs are
CSRF-protected POSTs answered by a redirect to the customer page (PRG) with a notice; a refused
field shows the page again with the form open and the sentence beside the field (400). Without
JavaScript the dialogs' triggers lead to GET pages holding the same forms.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from flask import Response, g, redirect, request, url_for
from flask.typing import ResponseReturnValue
from pydantic import ValidationInfo, field_validator

from api.context import state
from api.dashboard import blueprint
from api.dashboard.forms import DashboardForm, Stripped, checking, read_form, refuse
from api.dashboard.pages import error_page, page
from transforms import customers as rules
from transforms.timefmt import iso_z, parse_iso8601
from warehouse import customers as repo
from warehouse.db import utcnow
from warehouse.errors import Invalid
from warehouse.workspaces import get_workspace

PRODUCT_MAX = 200  # entitlement_grants.product_id's width (as v1's)
REASON_MAX = 2000  # a paragraph for the audit log (as v1's)
# The durations offered beside the free field (any date-only ISO 8601 duration is accepted).
DURATIONS = (("P7D", "7 days"), ("P1M", "1 month"), ("P3M", "3 months"), ("P1Y", "1 year"))
MATCHED_ON = {
    "user_id": "user id",
    "purchase_id": "purchase id",
    "stripe_customer_id": "Stripe customer id",
    "stripe_subscription_id": "Stripe subscription id",
    "provider_customer_id": "RevenueCat or Adapty customer id",
}
NOTICES = {
    "granted": "Promotional access granted: the entitlement endpoints answer it now, and it is on the timeline.",
    "ended": "Promotional access ended: the entitlement endpoints answer it inactive now.",
}
SEARCH_HELP = (
    "An exact id: user id, purchase id (Apple original transaction id, Google Play purchase token, generic "
    "purchase id), Stripe customer or subscription id, RevenueCat or Adapty customer id."
)


def _sentence(refusal: ValueError) -> str:
    """A refusal as the page shows it beside the field: capitalised, with a full stop."""
    text = str(refusal)
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


class GrantForm(DashboardForm):
    """The "Grant promotional access" form: what, until when (an expiry or a duration: exactly
    one, checked with `transforms.customers.promotion_end` in the view), and why."""

    product_id: Stripped = ""
    expires_at: Stripped = ""
    duration: Stripped = ""
    reason: Stripped = ""

    @field_validator("product_id")
    @classmethod
    def _product(cls, product_id: str, info: ValidationInfo) -> str:
        if checking(info) and not product_id:
            raise refuse("Give the product id to grant.")
        if checking(info) and len(product_id) > PRODUCT_MAX:
            raise refuse(f"A product id has at most {PRODUCT_MAX} characters.")
        return product_id

    @field_validator("expires_at")
    @classmethod
    def _expiry(cls, expires_at: str, info: ValidationInfo) -> str:
        if checking(info) and expires_at:
            try:
                parse_iso8601(expires_at)
            except ValueError as exc:
                raise refuse(_sentence(ValueError(f"expires at {exc}"))) from None
        return expires_at

    @field_validator("reason")
    @classmethod
    def _reason(cls, reason: str, info: ValidationInfo) -> str:
        if checking(info) and not reason:
            raise refuse("Give a reason: it is kept in the audit log.")
        if checking(info) and len(reason) > REASON_MAX:
            raise refuse(f"A reason has at most {REASON_MAX} characters.")
        return reason


class EndForm(DashboardForm):
    """The End dialog: an optional reason, kept in the audit log."""

    reason: Stripped = ""

    @field_validator("reason")
    @classmethod
    def _reason(cls, reason: str, info: ValidationInfo) -> str:
        if checking(info) and len(reason) > REASON_MAX:
            raise refuse(f"A reason has at most {REASON_MAX} characters.")
        return reason


def _grant_end(form: GrantForm, now: datetime) -> tuple[datetime | None, dict[str, str]]:
    """When the grant ends, or the refusal by field: exactly one of the expiry and the duration."""
    expires, duration = form.expires_at or None, form.duration or None
    if (expires is None) == (duration is None):
        which = "not both" if expires else "one of them"
        return None, {"until": f"Give an expiry or a duration ({which})."}
    try:
        ends = rules.promotion_end(now, expires_at=parse_iso8601(expires) if expires else None, duration=duration)
    except rules.CustomerInputError as exc:
        # The rule names the API's field; the page's label for it is "Expires at".
        return None, {
            "expires_at" if expires else "duration": _sentence(ValueError(str(exc).replace("expires_at", "the expiry")))
        }
    return ends, {}


def _wire(value: Any) -> Any:
    """Datetimes in a nested value as ISO 8601 UTC strings (v1's writing), for `<time>` elements."""
    if isinstance(value, datetime):
        return iso_z(value)
    if isinstance(value, dict):
        return {k: _wire(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_wire(v) for v in value]
    return value


# ---------------------------------------------------------------- the search


@blueprint.get("/customers")
def customers() -> ResponseReturnValue:
    """The search box; with `query`, the customers it names (one goes straight to its page)."""
    if "query" not in request.args:
        return _search_page()
    typed = request.args["query"]
    try:
        text = rules.check_query(typed)
    except rules.CustomerInputError as exc:
        return _search_page(400, query=typed, error=_sentence(exc))
    with state().db.read() as conn:
        hits = repo.search(conn, workspace_id=g.workspace_id, query=text)
    if len(hits) == 1:
        return redirect(url_for("dashboard.customer", user_id=hits[0].user_id, app_id=hits[0].app_id), 303)
    rows = [{"user_id": h.user_id, "app_id": h.app_id, "matched_on": MATCHED_ON[h.matched_on]} for h in hits]
    # No hit: the id may still be a user known only from events, which the search cannot see.
    by_id = url_for("dashboard.customer", user_id=text) if not hits and "/" not in text else None
    return _search_page(query=typed, searched=text, rows=rows, by_id=by_id)


def _search_page(status: int = 200, **extra: Any) -> Response:
    return page(
        "dashboard/customers/search.html",
        status,
        title="Customers",
        section="customers",
        help=SEARCH_HELP,
        query_max=rules.QUERY_MAX,
        **extra,
    )


# ---------------------------------------------------------------- the customer page


def _customer_page(user_id: str, status: int = 200, **extra: Any) -> Response:
    """The customer page (404 when FloKit never heard of the user in the app), `extra` being the
    open form, its values and errors, or a notice."""
    before = None
    raw_before = request.args.get("timeline_before")
    if raw_before:
        try:
            before = parse_iso8601(raw_before)
        except ValueError as exc:
            return error_page(400, f"timeline_before {exc}")
    app = state()
    with app.db.read() as conn:
        try:
            app_id = repo.resolve_app(conn, workspace_id=g.workspace_id, app_id=request.args.get("app_id") or None)
        except Invalid as exc:  # several apps and none named: the search's links name it
            return error_page(400, f"{exc}: open the customer from the search.")
        found = repo.customer(
            conn, app.settings.paths, workspace_id=g.workspace_id, app_id=app_id, user_id=user_id, now=utcnow(),
            timeline_before=before, timeline_limit=rules.TIMELINE_LIMIT_DEFAULT,
        )  # fmt: skip
        currency = get_workspace(conn, g.workspace_id).reporting_currency
    if found is None:
        return error_page(404, f"No customer {user_id} in app {app_id}: FloKit has never heard of this user.")
    customer = _wire(found)
    timeline = customer["timeline"]
    here = {"user_id": user_id, "app_id": app_id}
    older = None
    if len(timeline) == rules.TIMELINE_LIMIT_DEFAULT:
        older = url_for(
            "dashboard.customer", user_id=user_id, app_id=app_id, timeline_before=timeline[-1]["occurred_at"]
        )
    return page(
        "dashboard/customers/customer.html",
        status,
        title=f"Customer {user_id}",
        section="customers",
        c=customer,
        here=here,
        currency=currency,
        older_url=older,
        newest_url=url_for("dashboard.customer", user_id=user_id, app_id=app_id) if before else None,
        products=sorted({e["product_id"] for e in customer["entitlements"] if e["product_id"]}),
        durations=DURATIONS,
        form=extra.pop("form", {"product_id": "", "expires_at": "", "duration": "", "reason": ""}),
        errors=extra.pop("errors", {}),
        end_errors=extra.pop("end_errors", {}),
        **extra,
    )


@blueprint.get("/customers/<user_id>")
def customer(user_id: str) -> Response:
    return _customer_page(user_id, notice=NOTICES.get(request.args.get("done", "")))


@blueprint.get("/customers/<user_id>/grant")
def confirm_grant(user_id: str) -> Response:
    """Without JavaScript the dialog cannot open: its trigger leads here, to the same form."""
    return _customer_page(user_id, confirm="grant")


@blueprint.post("/customers/<user_id>/grant")
def grant(user_id: str) -> ResponseReturnValue:
    form = read_form(GrantForm)
    now = utcnow()
    errors = dict(form.errors)
    ends = None
    if "expires_at" not in errors:
        ends, until = _grant_end(form.values, now)
        errors.update(until)
    if errors or ends is None:
        return _customer_page(user_id, 400, confirm="grant", form=form.values.model_dump(), errors=errors)
    with state().db.write() as conn:
        try:
            app_id = repo.resolve_app(conn, workspace_id=g.workspace_id, app_id=request.args.get("app_id") or None)
        except Invalid as exc:  # the page's form always names the app; a hand-made address may not
            return error_page(400, f"{exc}: open the customer from the search.")
        repo.grant_promotional(
            conn, workspace_id=g.workspace_id, app_id=app_id, user_id=user_id, product_id=form.values.product_id,
            ends_at=ends, reason=form.values.reason, actor=g.operator,
        )  # fmt: skip
    return redirect(url_for("dashboard.customer", user_id=user_id, app_id=app_id, done="granted"), 303)


@blueprint.get("/customers/<user_id>/entitlements/<grant_id>/end")
def confirm_end(user_id: str, grant_id: str) -> Response:
    """Without JavaScript: the End dialog's form on a page of its own."""
    return _customer_page(user_id, confirm="end", confirm_grant=grant_id)


@blueprint.post("/customers/<user_id>/entitlements/<grant_id>/end")
def end_grant(user_id: str, grant_id: str) -> ResponseReturnValue:
    form = read_form(EndForm)
    if form.errors:
        return _customer_page(
            user_id, 400, confirm="end", confirm_grant=grant_id, end_reason=form.values.reason, end_errors=form.errors
        )
    with state().db.write() as conn:
        # Another workspace's or another user's grant: NotFound (404 page); a store's: Conflict (409 page).
        row = repo.end_promotional(
            conn, workspace_id=g.workspace_id, user_id=user_id, grant_id=grant_id, reason=form.values.reason or None,
            actor=g.operator,
        )  # fmt: skip
    return redirect(url_for("dashboard.customer", user_id=user_id, app_id=row.app_id, done="ended"), 303)
