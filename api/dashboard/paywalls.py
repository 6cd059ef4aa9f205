"""Paywalls: each paywall's live version and history, and publishing a new version from a browser.

Publishing is two steps, as the CLI's `flokit admin paywalls publish` is one: the operator edits
the document (JSON, the CLI's file format), FloKit validates it with the CLI's own model
(`transforms.paywall`) and shows what changes against the live version, then the operator
confirms and `warehouse.paywalls.configs.publish` makes it the next version, the operator's email
its `published_by` and audit actor. The confirmation carries the version it was reviewed
against: if someone (another operator, or the executor starting or ending an offer test)
published meanwhile, the publish answers 409 with what is live now instead of overwriting it
unseen. Weights are relative, as the gateway splits them (`transforms.paywall.shares`).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from flask import Response, g, redirect, request, url_for
from flask.typing import ResponseReturnValue
from pydantic import BeforeValidator

from api.context import state
from api.dashboard import blueprint
from api.dashboard.forms import DashboardForm, read_form
from api.dashboard.pages import error_page, is_htmx, page
from transforms import paywall
from transforms.timefmt import iso_z
from warehouse.errors import NotFound, UnknownApp
from warehouse.experiments import repository as experiment_repo
from warehouse.paywalls import configs, history

# The largest document the form takes (a paywall of 20 variants with a few offers each is ~10 KB).
MAX_DOCUMENT = 100_000


def _version(text: Any) -> int:
    """The live version the draft was written against; -1 (matches none) if it is not a number."""
    try:
        return max(0, int(text))
    except ValueError:
        return -1


class DraftForm(DashboardForm):
    """The review and publish forms: the document as typed (JSON text, checked by `_read_draft`
    against the paywall schema, problem by problem) and the version it was edited against."""

    document: str = ""
    base_version: Annotated[int, BeforeValidator(_version)] = 0


GATEWAY_PATH = "/api/paywall/config"


class _PublishedMeanwhile(Exception):
    """Rolls back a publish that did not follow the version the operator reviewed."""


def _app(conn: Any, app_id: str) -> history.AppRef:
    found = history.app_in_workspace(conn, workspace_id=g.workspace_id, app_id=app_id)
    if found is None:
        raise NotFound(f"No app {app_id} in this workspace")
    return found


def _check_paywall_id(paywall_id: str) -> None:
    if not paywall_id or len(paywall_id) > configs.MAX_PAYWALL_ID:
        raise NotFound(f"No paywall {paywall_id[:40]!r}")


def _pretty(document: paywall.PaywallDocument) -> str:
    return json.dumps(document.model_dump(mode="json", exclude_none=True), indent=2)


def _version_rows(conn: Any, app_id: str, paywall_id: str) -> list[dict[str, Any]]:
    found = history.versions(conn, app_id=app_id, paywall_id=paywall_id)
    made_by = history.origins(conn, workspace_id=g.workspace_id, app_id=app_id, paywall_id=paywall_id)
    rows = []
    for i, p in enumerate(found):
        previous = found[i + 1].document if i + 1 < len(found) else None
        origin = made_by.get(p.version)
        rows.append(
            {
                "published": p,
                "at": iso_z(p.published_at),
                "origin": origin,
                "live": i == 0,
                "changes": paywall.changes(previous, p.document) if previous is not None else None,
                "variants": len(p.document.variants),
                "experiment": p.document.experiment_active,
            }
        )
    return rows


def _variant_rows(document: paywall.PaywallDocument) -> list[dict[str, Any]]:
    share = paywall.shares(document)
    return [{"variant": v, "share": share[v.variant_id]} for v in document.variants]


@blueprint.get("/paywalls")
def paywalls() -> Response:
    with state().db.read() as conn:
        found = history.paywalls(conn, workspace_id=g.workspace_id)
        apps = history.workspace_apps(conn, workspace_id=g.workspace_id)
    return page(
        "dashboard/paywalls/list.html",
        title="Paywalls",
        section="paywalls",
        rows=[{"p": p, "at": iso_z(p.published_at)} for p in found],
        apps=[a for a in apps if not a.revoked],
        max_paywall_id=configs.MAX_PAYWALL_ID,
    )


@blueprint.get("/paywalls/open")
def open_paywall() -> ResponseReturnValue:
    """The list's "publish a paywall" form is a GET (no JavaScript): to the paywall's own page."""
    app_id = request.args.get("app_id", "")
    paywall_id = request.args.get("paywall_id", "").strip()
    if not paywall_id or len(paywall_id) > configs.MAX_PAYWALL_ID or "/" in paywall_id:
        return error_page(400, f"A paywall id is 1 to {configs.MAX_PAYWALL_ID} characters, without '/'.")
    with state().db.read() as conn:
        _app(conn, app_id)
    return redirect(url_for("dashboard.paywall_detail", app_id=app_id, paywall_id=paywall_id), 303)


def _detail(
    app_id: str,
    paywall_id: str,
    *,
    status: int = 200,
    draft: str | None = None,
    problems: list[tuple[str, str]] | None = None,
    notice: str | None = None,
) -> Response:
    _check_paywall_id(paywall_id)
    with state().db.read() as conn:
        app = _app(conn, app_id)
        live = configs.live(conn, app_id=app_id, paywall_id=paywall_id)
        versions = _version_rows(conn, app_id, paywall_id)
        experimented = experiment_repo.for_paywall(conn, app_id, paywall_id)
    return page(
        "dashboard/paywalls/detail.html",
        status,
        title=f"Paywall {paywall_id}",
        section="paywalls",
        app=app,
        paywall_id=paywall_id,
        live=live,
        experiments_running=len(experimented.running),
        experimented=experimented.any,
        live_at=iso_z(live.published_at) if live else None,
        live_variants=_variant_rows(live.document) if live else [],
        versions=versions,
        origin=versions[0]["origin"] if versions else None,
        draft=draft if draft is not None else (_pretty(live.document) if live else ""),
        problems=problems or [],
        base_version=live.version if live else 0,
        notice=notice,
        published=request.args.get("published", type=int),
        gateway_url=f"{GATEWAY_PATH}?app_id={app_id}&paywall_id={paywall_id}",
    )


@blueprint.get("/paywalls/<app_id>/<paywall_id>")
def paywall_detail(app_id: str, paywall_id: str) -> Response:
    return _detail(app_id, paywall_id)


def _read_draft(form: DraftForm) -> tuple[str, paywall.PaywallDocument | None, list[tuple[str, str]]]:
    """The form's document: the text as typed, and the parsed document or the reasons it is refused."""
    text = form.document
    if len(text) > MAX_DOCUMENT:
        return text[:MAX_DOCUMENT], None, [("document", f"At most {MAX_DOCUMENT} characters.")]
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        return text, None, [("document", f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})")]
    problems = paywall.document_problems(raw)
    if problems:
        return text, None, problems
    return text, paywall.parse_document(raw), []


def _in_place(response: Response) -> Response:
    """For htmx: the page's content replaces the page's content (the form with the reasons beside
    the field, or the notice that someone published meanwhile), not the review in the dialog."""
    if is_htmx():
        response.headers["HX-Retarget"] = "#paywall-page"
        response.headers["HX-Reswap"] = "outerHTML"
        response.headers["HX-Reselect"] = "#paywall-page"
    return response


def _refused(app_id: str, paywall_id: str, text: str, problems: list[tuple[str, str]]) -> Response:
    return _in_place(_detail(app_id, paywall_id, status=400, draft=text, problems=problems))


def _moved_on(live: configs.Published | None) -> str:
    if live is None:
        return "The paywall has no published version any more."
    return (
        f"Someone published meanwhile: version {live.version} by {live.published_by} "
        f"({iso_z(live.published_at)}) is live now. Review your changes against it and publish again."
    )


@blueprint.post("/paywalls/<app_id>/<paywall_id>/review")
def paywall_review(app_id: str, paywall_id: str) -> Response:
    """The changes the draft makes against the live version, with the button that publishes it."""
    _check_paywall_id(paywall_id)
    form = read_form(DraftForm).values
    text, document, problems = _read_draft(form)
    if document is None:
        return _refused(app_id, paywall_id, text, problems)
    with state().db.read() as conn:
        app = _app(conn, app_id)
        live = configs.live(conn, app_id=app_id, paywall_id=paywall_id)
    base = form.base_version
    if (live.version if live else 0) != base:
        return _in_place(_detail(app_id, paywall_id, status=409, draft=text, notice=_moved_on(live)))
    changes = paywall.changes(live.document if live else None, document)
    return page(
        "dashboard/paywalls/review.html",
        title=f"Publish paywall {paywall_id}?",
        section="paywalls",
        app=app,
        paywall_id=paywall_id,
        live=live,
        changes=changes,
        document_text=_pretty(document),
        variants=_variant_rows(document),
        experiment=document.experiment_active,
        next_version=(live.version if live else 0) + 1,
        base_version=base,
        in_dialog=is_htmx(),
    )


@blueprint.post("/paywalls/<app_id>/<paywall_id>/publish")
def paywall_publish(app_id: str, paywall_id: str) -> ResponseReturnValue:
    _check_paywall_id(paywall_id)
    form = read_form(DraftForm).values
    text, document, problems = _read_draft(form)
    if document is None:
        return _refused(app_id, paywall_id, text, problems)
    base = form.base_version
    published: configs.Published | None = None
    try:
        with state().db.write() as conn:
            _app(conn, app_id)
            live = configs.live(conn, app_id=app_id, paywall_id=paywall_id)
            if (live.version if live else 0) == base:
                published = configs.publish(
                    conn, app_id=app_id, paywall_id=paywall_id, document=document, actor=g.operator
                )
                # publish() locks the app row (PostgreSQL) after the read above: a publish that
                # committed in between shows as a version number skipped. Roll back, say so.
                if published.version != base + 1:
                    raise _PublishedMeanwhile
    except _PublishedMeanwhile:
        published = None
        with state().db.read() as conn:
            live = configs.live(conn, app_id=app_id, paywall_id=paywall_id)
    except UnknownApp:
        return error_page(409, f"The app {app_id} is revoked: the gateway serves none of its paywalls.")
    if published is None:
        return _in_place(_detail(app_id, paywall_id, status=409, draft=text, notice=_moved_on(live)))
    return redirect(
        url_for("dashboard.paywall_detail", app_id=app_id, paywall_id=paywall_id, published=published.version), 303
    )
