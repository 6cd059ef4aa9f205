"""The action queue and each action's detail: approve, reject and roll back from a browser.

The same repository functions as `api/v1/actions.py` (`list_actions`, `get_action`, `transition`,
the shared `timeline`), with the signed-in operator's email as the actor. Every form is a plain
POST answered with a redirect (POST-redirect-GET), so the pages work without JavaScript; with
htmx, the POST answers the updated row (queue) or the page (detail, from which htmx selects the
detail section) instead. A conflict (someone acted first: the repository's `TransitionRefused`,
v1's 409) answers 409 with the action's current state and who moved it there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flask import Response, g, redirect, request, url_for
from flask.typing import ResponseReturnValue
from pydantic import BaseModel, Field, ValidationError, ValidationInfo, field_validator

from api.context import state
from api.dashboard import blueprint
from api.dashboard.forms import DashboardForm, Stripped, checking, read_form, refuse
from api.dashboard.pages import bad_query, error_page, is_htmx, page, paging
from transforms import actions as rules
from transforms.actions.consequences import accounts_of, approve_consequence, impact_sentence, rollback_consequence
from transforms.timefmt import iso_z
from warehouse.actions import executions
from warehouse.actions import repository as repo
from warehouse.actions.timeline import ad_accounts_by_campaign, timeline
from warehouse.errors import TransitionRefused

# The queue's page size unless the query says otherwise ("1-25 of 212"); v1's maximum.
PAGE_SIZE = 25
MAX_PAGE = 100
# v1's limits on a note or reason (api/v1/actions.py NOTE_MAX).
NOTE_MAX = 2000
VERBS = ("approve", "reject", "rollback")


class NoteForm(DashboardForm):
    """Approve and roll back: an optional note for the action's history; `fragment` names the part
    of the page an htmx request swaps (a queue row, the detail)."""

    note: Stripped = ""
    fragment: str | None = None

    @property
    def text(self) -> str:
        return self.note

    @field_validator("note")
    @classmethod
    def _short(cls, note: str, info: ValidationInfo) -> str:
        if checking(info) and len(note) > NOTE_MAX:
            raise refuse(f"At most {NOTE_MAX} characters.")
        return note


class RejectForm(DashboardForm):
    """Reject: the reason, required (it is kept in the action's history)."""

    reason: Stripped = ""
    fragment: str | None = None

    @property
    def text(self) -> str:
        return self.reason

    @field_validator("reason")
    @classmethod
    def _given(cls, reason: str, info: ValidationInfo) -> str:
        if checking(info) and not reason:
            raise refuse("Give a reason: it is kept in the action's history.")
        if checking(info) and len(reason) > NOTE_MAX:
            raise refuse(f"At most {NOTE_MAX} characters.")
        return reason


VERB_LABELS = {"approve": "Approve", "reject": "Reject", "rollback": "Roll back"}
STATUS_LABELS: dict[str, str] = {s: s.replace("_", " ") for s in rules.STATUSES}


class QueueQuery(BaseModel):
    """The queue's filters and page, as v1 takes them (`ListQuery`) plus the type."""

    status: rules.Status | None = None
    type: rules.ActionType | None = None
    limit: int = Field(PAGE_SIZE, ge=1, le=MAX_PAGE)
    offset: int = Field(0, ge=0, le=1_000_000)


@dataclass(frozen=True)
class Control:
    """One verb on one action: offered, or shown disabled with the reason."""

    verb: str
    label: str
    allowed: bool
    reason: str | None
    consequence: str


def _controls(action: repo.Action, accounts: list[str]) -> list[Control]:
    """Approve and reject where the state machine could take them (disabled, with why, for a
    draft's approve); roll back only for the types that can be rolled back."""
    out = []
    for verb in VERBS:
        sources = rules.allowed_sources(verb, action.type)
        if verb == "rollback" and not sources:
            continue  # an offer test is never rolled back: no button at all
        allowed = action.status in sources
        if not allowed and not (verb == "approve" and action.status == "draft"):
            continue
        reason = None
        if not allowed:
            failing = [c["check"] for c in action.guardrail_checks if not c.get("passed")]
            reason = "A guardrail check fails: " + ", ".join(failing) if failing else "Guardrail checks have not passed"
        consequence = (
            approve_consequence(action.type, action.parameters, accounts)
            if verb == "approve"
            else rollback_consequence(action.type, action.parameters, accounts)
            if verb == "rollback"
            else "The action is closed as rejected, with your reason in its history; the engine does not propose "
            "it again for the workspace policy's suppress_after_reject_days (14 by default)."
        )
        out.append(Control(verb, VERB_LABELS[verb], allowed, reason, consequence))
    return out


def _status_text(action: repo.Action) -> str:
    """The badge's text: the status, and for a draft which guardrail holds it back."""
    label = STATUS_LABELS[action.status]
    if action.status == "draft":
        failing = [c["check"] for c in action.guardrail_checks if not c.get("passed")]
        if failing:
            return f'{label} — guardrail "{failing[0]}" fails' + (f" (+{len(failing) - 1})" if len(failing) > 1 else "")
    return label


def _row_context(action: repo.Action, accounts: list[str], *, notice: str | None = None) -> dict[str, Any]:
    return {
        "action": action,
        "status_text": _status_text(action),
        "type_label": rules.TYPE_LABELS[action.type],
        "controls": _controls(action, accounts),
        "created": iso_z(action.created_at),
        "notice": notice,
    }


def _accounts(conn: Any, action: repo.Action) -> list[str]:
    return accounts_of(action.parameters, ad_accounts_by_campaign(conn, workspace_id=action.workspace_id))


@blueprint.get("/actions")
def actions() -> Response:
    try:
        query = QueueQuery.model_validate({k: v for k, v in request.args.items() if v != ""})
    except ValidationError as exc:
        return bad_query(exc)
    with state().db.read() as conn:
        found, total = repo.list_actions(
            conn,
            workspace_id=g.workspace_id,
            status=query.status,
            action_type=query.type,
            limit=query.limit,
            offset=query.offset,
        )
        by_campaign = ad_accounts_by_campaign(conn, workspace_id=g.workspace_id)
        rows = [_row_context(a, accounts_of(a.parameters, by_campaign)) for a in found]
    filters = {k: v for k, v in (("status", query.status), ("type", query.type)) if v}
    return page(
        "dashboard/actions/list.html",
        title="Actions",
        section="actions",
        rows=rows,
        total=total,
        query=query,
        filtered=bool(filters),
        **paging(url_for("dashboard.actions"), filters, query, page_size=PAGE_SIZE, shown=len(found), total=total),
        statuses=[(s, STATUS_LABELS[s]) for s in rules.STATUSES],
        types=[(t, rules.TYPE_LABELS[t]) for t in rules.ACTION_TYPES],
        here=request.full_path.rstrip("?"),
    )


def _history(entries: list[Any]) -> list[dict[str, Any]]:
    """The timeline as the template shows it: one line per entry, what, who and when."""
    out = []
    for e in entries:
        if isinstance(e, executions.Execution):
            out.append(
                {
                    "kind": "execution",
                    "at": iso_z(e.updated_at),
                    "what": f"{'Applied' if e.kind == 'apply' else 'Reverted'} leg {e.leg} on {e.platform}: "
                    f"{e.object_type} {e.object_id} {e.field} {e.before} → {e.after}",
                    "who": "flokit executor",
                    "state": e.state,
                    "detail": e.last_response,
                }
            )
        elif isinstance(e, repo.EvaluationRecord):
            out.append(
                {
                    "kind": "evaluation",
                    "at": iso_z(e.created_at),
                    "what": rules.evaluation_summary(e.kind, e.outcome, e.detail),
                    "who": e.engine_version or "",
                    "state": e.outcome,
                    "detail": None,
                }
            )
        else:
            moved = f"{STATUS_LABELS.get(e.from_status or '', 'created')} → {STATUS_LABELS[e.to_status]}"
            out.append(
                {
                    "kind": "transition",
                    "at": iso_z(e.created_at),
                    "what": f"{e.trigger}: {moved}" if e.from_status else f"created as {STATUS_LABELS[e.to_status]}",
                    "who": e.actor,
                    "state": STATUS_LABELS[e.to_status],
                    "detail": e.note,
                }
            )
    return out


def _detail(action_id: str, *, status: int = 200, notice: str | None = None, **extra: Any) -> Response:
    with state().db.read() as conn:
        action = repo.get_action(conn, workspace_id=g.workspace_id, action_id=action_id)  # NotFound: 404 page
        entries = timeline(conn, workspace_id=g.workspace_id, action_id=action_id)
        accounts = _accounts(conn, action)
    return page(
        "dashboard/actions/detail.html",
        status,
        title=action.title,
        section="actions",
        history=_history(entries),
        impact=impact_sentence(action.expected_impact),
        here=url_for("dashboard.action", action_id=action_id),
        **_row_context(action, accounts, notice=notice),
        **extra,
    )


@blueprint.get("/actions/<action_id>")
def action(action_id: str) -> Response:
    return _detail(action_id)


@blueprint.get("/actions/<action_id>/<verb>")
def confirm(action_id: str, verb: str) -> Response:
    """Without JavaScript the dialogs cannot open: their trigger links lead here, to the same form."""
    if verb not in VERBS:
        return error_page(404, f"No such page: {request.path}")
    return _detail(action_id, confirm=verb, next_url=_next())


def _next() -> str:
    """Where a plain form POST returns to: the page it came from, if it is a dashboard page."""
    raw = request.values.get("next", "")
    return raw if raw.startswith("/dashboard/") and not raw.startswith("//") else url_for("dashboard.actions")


def _conflict_notice(refused: TransitionRefused, action_id: str) -> str:
    with state().db.read() as conn:
        entries = timeline(conn, workspace_id=g.workspace_id, action_id=action_id)
    moved = [e for e in entries if isinstance(e, repo.TransitionRecord)]
    last = moved[-1] if moved else None
    status = STATUS_LABELS.get(refused.status, refused.status)
    if last is None:
        return f"Someone acted first: this action is already {status}."
    at = (iso_z(last.created_at) or "")[:19].replace("T", " ")  # to the second: the click was moments ago
    return f"Someone acted first: this action is already {status} by {last.actor} at {at} UTC."


@blueprint.post("/actions/<action_id>/<verb>")
def act(action_id: str, verb: str) -> ResponseReturnValue:
    if verb not in VERBS:
        return error_page(404, f"No such page: {request.path}")
    form = read_form(RejectForm) if verb == "reject" else read_form(NoteForm)
    text = form.values.text
    fragment = form.values.fragment if is_htmx() else None
    problem = next(iter(form.errors.values()), None)
    if problem is not None:
        if fragment == "row":
            with state().db.read() as conn:
                found = repo.get_action(conn, workspace_id=g.workspace_id, action_id=action_id)
                ctx = _row_context(found, _accounts(conn, found))
            response = page(
                "dashboard/actions/_verb_form.html", 400, control_verb=verb, form_error=problem, here=_next(), **ctx
            )
            response.headers["HX-Retarget"] = f"#form-{verb}-{action_id}"
            response.headers["HX-Reswap"] = "outerHTML"
            return response
        return _detail(action_id, status=400, confirm=verb, form_error=problem, next_url=_next())
    try:
        with state().db.write() as conn:
            repo.transition(
                conn,
                workspace_id=g.workspace_id,
                action_id=action_id,
                trigger=verb,
                actor=g.operator,
                note=text or None,
            )
    except TransitionRefused as refused:
        notice = _conflict_notice(refused, action_id)
        if fragment == "row":
            return _row(action_id, 409, notice=notice)
        return _detail(action_id, status=409, notice=notice)
    if fragment == "row":
        return _row(action_id, 200)
    if fragment == "detail":
        return _detail(action_id)
    return redirect(_next(), 303)


def _row(action_id: str, status: int, *, notice: str | None = None) -> Response:
    with state().db.read() as conn:
        found = repo.get_action(conn, workspace_id=g.workspace_id, action_id=action_id)
        ctx = _row_context(found, _accounts(conn, found), notice=notice)
    return page("dashboard/actions/_row.html", status, here=_next(), **ctx)
