"""API keys from a browser: the list (scope, created, last used), create, rotate and revoke.

The same `warehouse.workspaces` functions as `flokit admin keys`, with the signed-in operator's
email as the audit actor. A new or rotated key is shown once, in the answer to the POST itself
(never behind a redirect, never stored): every dashboard page is sent `Cache-Control: no-store`,
so the browser keeps no copy either. Rotation replaces the secret in one statement: the old key
answers 401 from the moment it commits, which the dialog says before the operator confirms.
"""

from __future__ import annotations

from typing import Any, cast

from flask import Response, g, redirect, request, url_for
from flask.typing import ResponseReturnValue
from pydantic import ValidationInfo, field_validator

from api.context import state
from api.dashboard import blueprint
from api.dashboard.forms import DashboardForm, checking, read_form, refuse
from api.dashboard.pages import error_page, page
from transforms.timefmt import iso_z
from warehouse.tables import SCOPES, Scope
from warehouse.workspaces import ApiKey, create_key, get_key, list_keys, revoke_key, rotate_key

VERBS = {"rotate": "Rotate", "revoke": "Revoke"}
SCOPE_LABELS = {"read_only": "read only", "read_write": "read and write"}
CONSEQUENCES = {
    "rotate": "A new secret replaces this key's secret at once: the old key answers 401 from that moment, "
    "on every request. Update every client that uses it. The new key is shown once.",
    "revoke": "The key stops working at once (401 on every request) and cannot be brought back. "
    "It stays listed as revoked.",
}
NOTICES = {"revoked": "Key revoked: it answers 401 from now on."}


class KeyForm(DashboardForm):
    """The create form: the new key's scope (a radio button)."""

    scope: str = ""

    @field_validator("scope")
    @classmethod
    def _known(cls, scope: str, info: ValidationInfo) -> str:
        if checking(info) and scope not in SCOPES:
            raise refuse(f"Choose a scope: {' or '.join(SCOPE_LABELS.values())}.")
        return scope


def _row(key: ApiKey) -> dict[str, Any]:
    status = "active"
    if key.revoked_at is not None:
        status = f"revoked {key.revoked_at:%Y-%m-%d %H:%M} UTC"
    elif key.rotated_at is not None:
        status = f"active (rotated {key.rotated_at:%Y-%m-%d %H:%M} UTC)"
    return {
        "key": key,
        "scope": SCOPE_LABELS.get(key.scope, key.scope),
        "status": status,
        "active": key.revoked_at is None,
        "created": iso_z(key.created_at),
        "last_used": iso_z(key.last_used_at),
    }


def _list(status: int = 200, **extra: Any) -> Response:
    with state().db.read() as conn:
        keys = list_keys(conn, g.workspace_id)
    return page(
        "dashboard/keys/list.html",
        status,
        title="API keys",
        section="keys",
        rows=[_row(k) for k in keys],
        scopes=[(s, SCOPE_LABELS[s]) for s in SCOPES],
        verbs=VERBS,
        consequences=CONSEQUENCES,
        **extra,
    )


@blueprint.get("/keys")
def keys() -> Response:
    return _list(notice=NOTICES.get(request.args.get("done", "")))


@blueprint.post("/keys")
def create_api_key() -> Response:
    form = read_form(KeyForm)  # the scope is one of SCOPES unless refused
    if form.errors:
        return _list(400, form_error=form.errors["scope"], chosen_scope=form.values.scope)
    with state().db.write() as conn:
        issued = create_key(conn, workspace_id=g.workspace_id, scope=cast(Scope, form.values.scope), actor=g.operator)
    return _list(201, issued=issued, issued_verb="created")


@blueprint.get("/keys/<key_id>/<verb>")
def confirm_key(key_id: str, verb: str) -> Response:
    """Without JavaScript the dialogs cannot open: their triggers lead here, to the same form."""
    if verb not in VERBS:
        return error_page(404, f"No such page: {request.path}")
    with state().db.read() as conn:
        key = get_key(conn, workspace_id=g.workspace_id, key_id=key_id)  # NotFound: 404 page
    return _list(confirm=verb, confirm_row=_row(key))


@blueprint.post("/keys/<key_id>/<verb>")
def key_verb(key_id: str, verb: str) -> ResponseReturnValue:
    if verb not in VERBS:
        return error_page(404, f"No such page: {request.path}")
    with state().db.write() as conn:
        key = get_key(conn, workspace_id=g.workspace_id, key_id=key_id)  # NotFound: 404 page
        if key.revoked_at is None:
            if verb == "rotate":
                issued = rotate_key(conn, key_id=key_id, actor=g.operator)
            else:
                revoke_key(conn, key_id=key_id, actor=g.operator)
    if key.revoked_at is not None:
        return _list(409, notice=f"Key {key_id} is already revoked: it cannot be {verb}d.", notice_is_error=True)
    if verb == "rotate":
        return _list(200, issued=issued, issued_verb="rotated")
    return redirect(url_for("dashboard.keys", done="revoked"), 303)
