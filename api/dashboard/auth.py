"""Sign-in for the dashboard: a one-time link becomes a server-side session behind a signed cookie.

`flokit admin login-link` mints the link (warehouse/dashboard/sessions.py stores its hash).
Opening it (`GET /dashboard/login?token=`) uses nothing: it looks the link up and shows "Sign in
to <workspace> as <email>" with one button. Pressing it (`POST /dashboard/login`) consumes the
link once and opens a session row. A GET that consumed the link was used up by whatever fetched
the address first: Slack's and mail scanners' link previews, a browser's prefetch; the operator
then met "already used". The browser keeps only the session id, in Flask's signed cookie session.
The cookie is signed, and CSRF tokens made, with keys derived from the one instance key (purposes
`dashboard-session`, `dashboard-csrf`), so every gunicorn worker and every restart agrees (a key
per worker lost the session on 31 of 40 requests in the design note's measurement). The row is
the truth: signing out deletes it, and a copied cookie whose row is gone signs nobody in.

Login CSRF. The sign-in POST has no session to check a CSRF token against, and the link's token
alone does not stop an attacker's page from posting the attacker's own link from the victim's
browser, signing the victim in to the attacker's workspace (whatever the victim then types,
a webhook URL, a paywall, lands there). SameSite=Lax does not help: the answer to a cross-site
top-level POST may still set a cookie. The confirmation page is the pre-session proof: rendering
it stores a random CSRF secret in the signed cookie (Flask-WTF keeps its token in the Flask
session, which is this cookie, signed session row or not) and puts the matching HMAC in the form;
the POST needs both (`validate_csrf`). A cross-site page can read neither; it has no cookie to
send (Lax cookies do not go with a cross-site POST) or, if one got there, a secret that does not
match the form the attacker built; and it cannot forge a cookie without the instance key. Over
HTTPS the cookie is `__Host-`, so a sibling subdomain cannot plant one either; over plain HTTP
(loopback) a browser's `Sec-Fetch-Site` other than same-origin is refused as well. The POST runs
`validate_csrf` itself rather than `csrf.protect()`, whose HTTPS check wants a Referer the
confirmation page (`Referrer-Policy: no-referrer`, the token is in its address) never lets go.

Cookie: HttpOnly, SameSite=Lax; over HTTPS also Secure and named `__Host-…` (bound to this host,
path /). HTTPS is what the request's scheme says, or behind FLOKIT_TRUSTED_PROXIES proxies what
the outermost trusted one put in X-Forwarded-Proto (as the passthrough reads it).
"""

from __future__ import annotations

import hashlib
from typing import Any

from flask import Flask, Response, current_app, g, redirect, request, session, url_for
from flask.sessions import SecureCookieSessionInterface
from flask.typing import ResponseReturnValue
from flask_wtf.csrf import CSRFProtect, validate_csrf

from api.context import state
from api.dashboard import blueprint
from api.dashboard.forms import DashboardForm, read_form
from api.dashboard.pages import LOGIN_COMMAND, error_page, page
from api.errors import FAILED_AUTHENTICATION
from api.passthrough.forward import from_proxies
from api.ratelimits import per_address
from transforms import dashboard_auth as rules
from transforms.sealing import derive_key
from warehouse.dashboard import sessions as repo
from warehouse.db import utcnow
from warehouse.settings import Settings
from warehouse.workspaces import get_workspace

COOKIE = "flokit_dashboard"
SECURE_COOKIE = "__Host-flokit_dashboard"
SESSION_KEY = "sid"
csrf = CSRFProtect()
# Reachable without a session: the way in, the way out's landing page, and the static files.
PUBLIC_ENDPOINTS = frozenset({"dashboard.login", "dashboard.sign_in", "dashboard.signed_out", "dashboard.static"})
# What a browser says of a request made from one of our own pages (absent: not a browser, or an
# old one; the CSRF token is checked all the same).
SAME_ORIGIN = frozenset({"same-origin", "none"})


class SignInForm(DashboardForm):
    """The sign-in confirmation: the CSRF token the link's page rendered and the link's token.
    Neither is checked here: the CSRF token by flask-wtf first, then the token by `repo.sign_in`."""

    csrf_token: str | None = None
    token: str = ""


def is_https() -> bool:
    return from_proxies("X-Forwarded-Proto", request.scheme, state().settings.trusted_proxies) == "https"


class DashboardCookie(SecureCookieSessionInterface):
    """Flask's signed cookie session, named and flagged by the request's scheme, and opened only
    on dashboard paths (no other surface reads or sets a cookie)."""

    salt = "flokit-dashboard-session"
    digest_method = staticmethod(hashlib.sha256)

    def get_cookie_name(self, app: Flask) -> str:
        return SECURE_COOKIE if is_https() else COOKIE

    def get_cookie_secure(self, app: Flask) -> bool:
        return is_https()

    def get_cookie_path(self, app: Flask) -> str:
        return "/"  # `__Host-` requires Path=/ and no Domain

    def get_cookie_domain(self, app: Flask) -> None:
        return None


def configure(app: Flask, settings: Settings) -> None:
    """Keys, cookie flags and CSRF for the dashboard; without an instance key there are none, and
    every dashboard page says how to create it (`before_request` below)."""
    if settings.instance_key:
        app.secret_key = derive_key(settings.instance_key, "dashboard-session")
        app.config["WTF_CSRF_SECRET_KEY"] = derive_key(settings.instance_key, "dashboard-csrf")
    app.session_interface = DashboardCookie()
    app.config.update(
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        PERMANENT_SESSION_LIFETIME=rules.SESSION_ABSOLUTE,
        # The cookie is set at sign-in and when the CSRF token is first made, not on every answer.
        SESSION_REFRESH_EACH_REQUEST=False,
        # Checked only by `csrf.protect()` in this blueprint: the other surfaces' POSTs carry keys.
        WTF_CSRF_CHECK_DEFAULT=False,
        # No time limit: a page left open for an hour still posts (the token lives with the session).
        WTF_CSRF_TIME_LIMIT=None,
    )
    csrf.init_app(app)


@blueprint.before_request
def _signed_in() -> Response | None:
    if not state().settings.instance_key:
        return error_page(
            503,
            "The dashboard needs the instance key: run `flokit db upgrade` (it creates one in the data "
            "directory) or set FLOKIT_SECRET_KEY, then restart the API.",
        )
    if request.endpoint in PUBLIC_ENDPOINTS:
        return None
    sid = session.get(SESSION_KEY)
    now = utcnow()
    db = state().db
    found = None
    if isinstance(sid, str):
        with db.read() as conn:
            found = repo.find_session(conn, session_id=sid, now=now)
            workspace = None if found is None else get_workspace(conn, found.workspace_id)
    if not isinstance(sid, str) or found is None or workspace is None:
        session.pop(SESSION_KEY, None)
        return login_needed("Your session has ended." if sid else "You are not signed in.")
    if repo.needs_touch(found, now):
        with db.write() as conn:
            repo.touch(conn, session_id=sid, now=now)
    g.operator = found.operator
    g.workspace_id = found.workspace_id
    g.workspace_name = workspace.name
    csrf.protect()  # POSTs only (WTF_CSRF_METHODS); a missing or wrong token is a 400 page
    return None


def login_needed(reason: str) -> Response:
    return page("dashboard/login_needed.html", 401, title="Sign-in needed", reason=reason, command=LOGIN_COMMAND)


def refused(refusal: repo.LoginRefused) -> Response:
    """The page for a link that cannot sign in; a guessed token counts against the address like a
    wrong key, whether it was opened or posted."""
    failed = current_app.extensions.get(FAILED_AUTHENTICATION)
    if failed is not None:
        failed()
    return page(
        "dashboard/login_refused.html",
        400 if refusal.reason == "unknown" else 410,
        title="Link no longer valid" if refusal.reason != "unknown" else "Link not valid",
        message=str(refusal),
        command=LOGIN_COMMAND,
    )


def no_token() -> Response:
    return error_page(400, f"This address needs a sign-in link's token. Get a link with `{LOGIN_COMMAND}`.")


@blueprint.get("/login")
@per_address
def login() -> ResponseReturnValue:
    """The link's page: who it signs in, where, until when, and a Sign in button. A read only: the
    link still works after any number of GETs (previews, prefetches, a reload)."""
    token = request.args.get("token", "")
    if not token:
        return no_token()
    now = utcnow()
    try:
        with state().db.read() as conn:
            link = repo.find_login_link(conn, token=token, now=now)
            sid = session.get(SESSION_KEY)
            current = repo.find_session(conn, session_id=sid, now=now) if isinstance(sid, str) else None
    except repo.LoginRefused as refusal:
        return refused(refusal)
    # `csrf_token()` in the form puts the pre-session secret in the cookie (see the module's doc).
    return page("dashboard/login_confirm.html", title="Sign in", link=link, token=token, current=current)


@blueprint.post("/login")
@per_address
def sign_in() -> ResponseReturnValue:
    """Consume the link (one conditional UPDATE) and open a session; only from the link's own page,
    which proves itself with the CSRF token it rendered (login CSRF: the module's doc)."""
    if request.headers.get("Sec-Fetch-Site", "same-origin") not in SAME_ORIGIN:
        return error_page(
            400,
            "A sign-in is confirmed on the page the link opens, not from another site. Open the sign-in link again.",
        )
    form = read_form(SignInForm).values
    try:
        validate_csrf(form.csrf_token)
    except ValueError as exc:  # wtforms' ValidationError (no type stubs): missing, invalid, not matching
        return error_page(400, f"{exc.args[0]} Open the sign-in link again and press Sign in.")
    if not form.token:
        return no_token()
    try:
        with state().db.write() as conn:
            old = session.get(SESSION_KEY)
            opened = repo.sign_in(conn, token=form.token)
            if isinstance(old, str):  # a new link replaces the session this browser had
                repo.sign_out(conn, session_id=old)
    except repo.LoginRefused as refusal:
        return refused(refusal)
    session.clear()  # a fresh CSRF token with the new session
    session[SESSION_KEY] = opened.session_id
    session.permanent = True  # the cookie lasts as long as the session's absolute end
    return redirect(url_for("dashboard.index"), 303)


@blueprint.post("/logout")
def logout() -> ResponseReturnValue:
    with state().db.write() as conn:
        repo.sign_out(conn, session_id=session[SESSION_KEY])
    session.clear()
    return redirect(url_for("dashboard.signed_out"), 303)


@blueprint.post("/logout-everywhere")
def logout_everywhere() -> ResponseReturnValue:
    with state().db.write() as conn:
        ended = repo.sign_out_everywhere(conn, operator=g.operator, workspace_id=g.workspace_id)
    session.clear()
    return redirect(url_for("dashboard.signed_out", ended=ended), 303)


@blueprint.get("/signed-out")
def signed_out() -> Response:
    ended = request.args.get("ended", type=int)
    return page("dashboard/signed_out.html", title="Signed out", ended=ended, command=LOGIN_COMMAND)


@blueprint.get("/")
def index() -> ResponseReturnValue:
    return redirect(url_for("dashboard.actions"), 302)


def template_context() -> dict[str, Any]:
    """What base.html shows of the signed-in operator (nothing when signed out)."""
    return {
        "operator": g.get("operator"),
        "workspace_id": g.get("workspace_id"),
        "workspace_name": g.get("workspace_name"),
    }


blueprint.app_context_processor(template_context)
