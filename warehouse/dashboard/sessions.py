"""Dashboard sign-in: mint a one-time login link, turn it into a session, end sessions.

Looking a link up (`find_login_link`, for the page that asks "Sign in?") is a read and uses
nothing: a link-preview bot or a mail scanner that fetches the address leaves it working.

Each racy step is one statement. Consuming a link is `UPDATE ... SET used_at = now WHERE
token_hash = :h AND used_at IS NULL AND expires_at > now RETURNING ...`: two browsers opening the
same link race on the row and exactly one gets it back; the other, like a reused or expired link,
gets nothing and is refused. Only hashes are stored; the caller holds the token and session id.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from transforms import dashboard_auth as rules
from warehouse import audit
from warehouse.dashboard.tables import dashboard_login_tokens, dashboard_sessions
from warehouse.db import utcnow
from warehouse.errors import WarehouseError
from warehouse.tables import audit_log, workspaces
from warehouse.workspaces import get_workspace

# 32 random bytes, as the design note says; base64url, so it travels in a URL and a cookie as is.
TOKEN_BYTES = 32
# Used links are kept this long after they expire (an audit of what was opened), then deleted.
KEEP_EXPIRED = timedelta(days=1)

Refusal = Literal["used", "expired", "unknown"]


class LoginRefused(WarehouseError):
    """The link cannot sign anyone in: already used, expired, or never issued."""

    def __init__(self, reason: Refusal) -> None:
        text = {
            "used": "This sign-in link was already used",
            "expired": "This sign-in link has expired",
            "unknown": "This sign-in link is not valid",
        }[reason]
        super().__init__(text)
        self.reason: Refusal = reason


class WorkspaceAmbiguous(WarehouseError):
    """No workspace was named and there is not exactly one to choose."""


@dataclass(frozen=True)
class Session:
    """A signed-in operator, as every dashboard request sees it."""

    operator: str
    workspace_id: str
    created_at: datetime
    last_seen_at: datetime
    expires_at: datetime


@dataclass(frozen=True)
class LoginLink:
    """An unused, unexpired link, as the confirmation page shows it before anyone presses Sign in."""

    operator: str
    workspace_id: str
    workspace_name: str
    expires_at: datetime


@dataclass(frozen=True)
class NewSession:
    session_id: str  # the only place the id exists in clear: it goes into the cookie
    session: Session


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def the_workspace(conn: Connection, workspace_id: str | None) -> str:
    """`workspace_id` if it exists (NotFound otherwise); without one, the only workspace there is."""
    if workspace_id is not None:
        return get_workspace(conn, workspace_id).id
    ids = conn.execute(sa.select(workspaces.c.id).order_by(workspaces.c.created_at).limit(2)).scalars().all()
    if len(ids) != 1:
        raise WorkspaceAmbiguous(
            "no workspace exists yet" if not ids else "there are several workspaces: name one with --workspace"
        )
    return ids[0]


def started_workspace(conn: Connection, starter: str) -> str | None:
    """The workspace `starter` (e.g. "flokit up") bootstrapped, the oldest if several; else the only
    workspace there is; else None."""
    created = conn.execute(
        sa.select(audit_log.c.workspace_id)
        .where(audit_log.c.action == "workspace.created", audit_log.c.actor == starter)
        .order_by(audit_log.c.id)
        .limit(1)
    ).scalar_one_or_none()
    if created is not None:
        return str(created)
    try:
        return the_workspace(conn, None)
    except WorkspaceAmbiguous:
        return None


def create_login_token(
    conn: Connection,
    *,
    operator: str,
    workspace_id: str,
    ttl: timedelta = rules.DEFAULT_LINK_TTL,
    actor: str = "cli",
    now: datetime | None = None,
) -> str:
    """A new one-time token for `operator` in `workspace_id` (NotFound for an unknown workspace).
    The token is returned once; only its hash is stored."""
    now = now or utcnow()
    email = rules.operator_email(operator)
    get_workspace(conn, workspace_id)
    token = secrets.token_urlsafe(TOKEN_BYTES)
    conn.execute(
        dashboard_login_tokens.insert().values(
            token_hash=digest(token), operator=email, workspace_id=workspace_id, created_at=now, expires_at=now + ttl
        )
    )
    audit.record(
        conn,
        workspace_id=workspace_id,
        actor=actor,
        action="dashboard.login_link_created",
        detail={"operator": email, "expires_at": (now + ttl).isoformat()},
    )
    return token


def _refusal(conn: Connection, token_hash: str) -> LoginRefused:
    """Why a link that did not match as usable is refused: never issued, used, or expired."""
    t = dashboard_login_tokens
    found = conn.execute(sa.select(t.c.used_at).where(t.c.token_hash == token_hash)).first()
    return LoginRefused("unknown" if found is None else "used" if found.used_at is not None else "expired")


def find_login_link(conn: Connection, *, token: str, now: datetime | None = None) -> LoginLink:
    """What `token` would sign in to, without using it (a SELECT on its hash); LoginRefused says
    why it cannot, with the same reasons `sign_in` gives."""
    now = now or utcnow()
    t = dashboard_login_tokens
    h = digest(token)
    row = conn.execute(
        sa.select(t.c.operator, t.c.workspace_id, workspaces.c.name.label("workspace_name"), t.c.expires_at)
        .join(workspaces, workspaces.c.id == t.c.workspace_id)
        .where(t.c.token_hash == h, t.c.used_at.is_(None), t.c.expires_at > now)
    ).first()
    if row is None:
        raise _refusal(conn, h)
    return LoginLink(**row._mapping)


def sign_in(conn: Connection, *, token: str, now: datetime | None = None) -> NewSession:
    """Consume the link (one UPDATE) and open a session; LoginRefused says why it cannot."""
    now = now or utcnow()
    t = dashboard_login_tokens
    row = conn.execute(
        t.update()
        .where(t.c.token_hash == digest(token), t.c.used_at.is_(None), t.c.expires_at > now)
        .values(used_at=now)
        .returning(t.c.operator, t.c.workspace_id)
    ).first()
    if row is None:
        raise _refusal(conn, digest(token))
    # Housekeeping in the same transaction: links long expired and sessions past their end.
    conn.execute(t.delete().where(t.c.expires_at < now - KEEP_EXPIRED))
    s = dashboard_sessions
    conn.execute(s.delete().where(sa.or_(s.c.expires_at <= now, s.c.last_seen_at <= now - rules.SESSION_IDLE)))
    session_id = secrets.token_urlsafe(TOKEN_BYTES)
    session = Session(
        operator=row.operator,
        workspace_id=row.workspace_id,
        created_at=now,
        last_seen_at=now,
        expires_at=now + rules.SESSION_ABSOLUTE,
    )
    conn.execute(s.insert().values(session_hash=digest(session_id), **session.__dict__))
    audit.record(conn, workspace_id=row.workspace_id, actor=row.operator, action="dashboard.signed_in")
    return NewSession(session_id=session_id, session=session)


def _live(session_id: str, now: datetime) -> tuple[sa.ColumnElement[bool], ...]:
    s = dashboard_sessions
    return (s.c.session_hash == digest(session_id), s.c.expires_at > now, s.c.last_seen_at > now - rules.SESSION_IDLE)


def find_session(conn: Connection, *, session_id: str, now: datetime | None = None) -> Session | None:
    """The live session with this id; None when unknown, idle too long or past its absolute end.
    A read: `needs_touch` says when the caller should also `touch` it."""
    now = now or utcnow()
    s = dashboard_sessions
    row = conn.execute(
        sa.select(s.c.operator, s.c.workspace_id, s.c.created_at, s.c.last_seen_at, s.c.expires_at).where(
            *_live(session_id, now)
        )
    ).first()
    return None if row is None else Session(**row._mapping)


def needs_touch(session: Session, now: datetime) -> bool:
    """`last_seen_at` is written at most every `SESSION_TOUCH_EVERY`, not on every page view."""
    return session.last_seen_at <= now - rules.SESSION_TOUCH_EVERY


def touch(conn: Connection, *, session_id: str, now: datetime | None = None) -> None:
    """Move a live session's `last_seen_at` to now (the idle expiry starts again)."""
    now = now or utcnow()
    conn.execute(dashboard_sessions.update().where(*_live(session_id, now)).values(last_seen_at=now))


def sign_out(conn: Connection, *, session_id: str) -> None:
    """End this one session (nothing happens for one already gone)."""
    s = dashboard_sessions
    row = conn.execute(
        s.delete().where(s.c.session_hash == digest(session_id)).returning(s.c.operator, s.c.workspace_id)
    ).first()
    if row is not None:
        audit.record(conn, workspace_id=row.workspace_id, actor=row.operator, action="dashboard.signed_out")


def sign_out_everywhere(conn: Connection, *, operator: str, workspace_id: str) -> int:
    """End every session of `operator`, in every browser and workspace; how many there were."""
    s = dashboard_sessions
    ended = conn.execute(s.delete().where(s.c.operator == operator).returning(s.c.session_hash)).all()
    audit.record(
        conn,
        workspace_id=workspace_id,
        actor=operator,
        action="dashboard.signed_out_everywhere",
        detail={"sessions": len(ended)},
    )
    return len(ended)
