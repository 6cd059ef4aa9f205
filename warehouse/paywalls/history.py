"""What the dashboard reads of the paywalls: every paywall of a workspace, each one's versions,
and which growth action published a version (the executor's offer tests publish too).

Publishing itself stays `configs.publish`, the one function the CLI, the executor and the
dashboard call.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from warehouse.actions.tables import action_executions, actions
from warehouse.paywalls.configs import Published, version
from warehouse.paywalls.tables import paywall_configs
from warehouse.tables import apps

# How many versions a paywall's page lists, newest first.
HISTORY_LIMIT = 50


@dataclass(frozen=True)
class AppRef:
    id: str
    name: str
    revoked: bool


@dataclass(frozen=True)
class PaywallSummary:
    app: AppRef
    paywall_id: str
    live_version: int
    published_by: str
    published_at: datetime
    versions: int


@dataclass(frozen=True)
class Origin:
    """The growth action whose executor published a version, and what that publish was."""

    action_id: str
    title: str
    kind: str  # "apply": the test started; "revert": the test ended
    published: str | None = None  # for a revert: "control" (the version before the test) or "winner"


def workspace_apps(conn: Connection, *, workspace_id: str) -> list[AppRef]:
    """Every app of the workspace, live first then by name; revoked apps are kept (their history stays)."""
    rows = conn.execute(
        sa.select(apps.c.id, apps.c.name, apps.c.revoked_at)
        .where(apps.c.workspace_id == workspace_id)
        .order_by(apps.c.revoked_at.is_not(None), apps.c.name, apps.c.id)
    )
    return [AppRef(id=r.id, name=r.name, revoked=r.revoked_at is not None) for r in rows]


def app_in_workspace(conn: Connection, *, workspace_id: str, app_id: str) -> AppRef | None:
    return next((a for a in workspace_apps(conn, workspace_id=workspace_id) if a.id == app_id), None)


def paywalls(conn: Connection, *, workspace_id: str) -> list[PaywallSummary]:
    """Every (app, paywall) of the workspace with a published version: its live (highest)
    version, who published it when, and how many versions it has. By app, then paywall id."""
    by_app = {a.id: a for a in workspace_apps(conn, workspace_id=workspace_id)}
    latest = (
        sa.select(
            paywall_configs.c.app_id,
            paywall_configs.c.paywall_id,
            sa.func.max(paywall_configs.c.version).label("live"),
            sa.func.count().label("versions"),
        )
        .where(paywall_configs.c.workspace_id == workspace_id)
        .group_by(paywall_configs.c.app_id, paywall_configs.c.paywall_id)
        .subquery()
    )
    rows = conn.execute(
        sa.select(latest, paywall_configs.c.published_by, paywall_configs.c.published_at)
        .join(
            paywall_configs,
            sa.and_(
                paywall_configs.c.app_id == latest.c.app_id,
                paywall_configs.c.paywall_id == latest.c.paywall_id,
                paywall_configs.c.version == latest.c.live,
            ),
        )
        .order_by(latest.c.app_id, latest.c.paywall_id)
    ).all()
    out = [
        PaywallSummary(
            app=by_app[r.app_id],
            paywall_id=r.paywall_id,
            live_version=r.live,
            published_by=r.published_by,
            published_at=r.published_at,
            versions=r.versions,
        )
        for r in rows
        if r.app_id in by_app
    ]
    return sorted(out, key=lambda p: (p.app.revoked, p.app.name, p.app.id, p.paywall_id))


def versions(conn: Connection, *, app_id: str, paywall_id: str, limit: int = HISTORY_LIMIT) -> list[Published]:
    """The paywall's published versions, newest (the live one) first."""
    numbers = conn.execute(
        sa.select(paywall_configs.c.version)
        .where(paywall_configs.c.app_id == app_id, paywall_configs.c.paywall_id == paywall_id)
        .order_by(paywall_configs.c.version.desc())
        .limit(limit)
    ).scalars()
    found = [version(conn, app_id=app_id, paywall_id=paywall_id, version=n) for n in list(numbers)]
    return [p for p in found if p is not None]


def origins(conn: Connection, *, workspace_id: str, app_id: str, paywall_id: str) -> dict[int, Origin]:
    """The versions a growth action's executor published, by version number, read from its
    ledger (`action_executions`, verified `paywall_config` writes on this app's paywall): an
    apply row's `after.version` is the test it published; a revert row publishes the next version
    after the test's (`before.version` + 1), the control back or the winner alone
    (orchestration/actions/executor.py `_apply_offer_test`, `finish_offer_test`)."""
    rows = conn.execute(
        sa.select(
            action_executions.c.kind,
            action_executions.c.before,
            action_executions.c.after,
            actions.c.id,
            actions.c.title,
        )
        .join(actions, actions.c.id == action_executions.c.action_id)
        .where(
            action_executions.c.workspace_id == workspace_id,
            action_executions.c.platform == "flokit",
            action_executions.c.object_type == "paywall",
            action_executions.c.object_id == f"{app_id}:{paywall_id}",
            action_executions.c.state == "verified",
        )
    ).all()
    out: dict[int, Origin] = {}
    for r in rows:
        if r.kind == "apply" and isinstance(r.after, dict) and "version" in r.after:
            out[int(r.after["version"])] = Origin(r.id, r.title, "apply")
        elif r.kind == "revert" and isinstance(r.before, dict) and "version" in r.before:
            chose = r.after.get("publish") if isinstance(r.after, dict) else None
            out[int(r.before["version"]) + 1] = Origin(r.id, r.title, "revert", chose)
    return out
