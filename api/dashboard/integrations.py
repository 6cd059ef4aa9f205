"""Integrations and ad accounts: status, last sync, `sync_stats`, the sync history, sync now.

The same repository functions as `api/v1/integrations.py` and `flokit admin integrations`:
`list_integrations`, `get_integration`, `sync_history`, `sync_stats`, and `request_sync`, which
is what "Sync now" calls, exactly as `POST /v1/integrations/{id}/sync` does (a `manual` sync row
queued for the Dagster sensor; while one is queued or running, that one is the answer). Nothing
here calls a provider. The status part of an integration's page polls itself every 5 s with htmx
while a sync is queued or running, and stops once none is.

Ad accounts (`warehouse.adaccounts`, `flokit admin ad-accounts`): the registry and "Sync now",
which writes a `pending` request (`warehouse.adaccounts.sync_requests.request_sync`, the operator
as `requested_by`) and returns; the Dagster sensor `ad_accounts_sync_sensor` launches the
registry sync for it and the run records the outcome on the request. The web app never calls an
ad platform (nor imports orchestration). The status block polls itself every 5 s with htmx while
the request is pending or running, as an integration's does.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from flask import Response, g, request

from api.context import state
from api.dashboard import blueprint
from api.dashboard.pages import page
from api.dashboard.sync_now import SyncNow
from transforms.adaccounts import kinds as platforms
from transforms.adaccounts.money import major_text
from transforms.integrations.kinds import INTEGRATION_TYPES, kind_of
from transforms.integrations.status import ACTIVE_SYNC_STATUSES
from transforms.timefmt import iso_z
from warehouse.adaccounts import repository as accounts
from warehouse.adaccounts import sync_requests
from warehouse.db import Connection, utcnow
from warehouse.integrations import repository as repo
from warehouse.integrations.stats import sync_stats


def sync_consequence() -> str:
    """What the sync now dialog says will happen."""
    return (
        "A manual sync is queued; FloKit's daemon (under flokit up) starts it at its next sensor tick (every "
        f"{state().settings.sensor_interval_s} s) and asks the provider for what is new since the last successful "
        "sync. If a sync is already queued or running, that one is the answer and nothing new is queued."
    )


CONNECT_COMMAND = "flokit admin integrations connect --workspace {ws} --type TYPE --config FILE.json --check"
AD_ACCOUNT_COMMAND = "flokit admin ad-accounts connect --workspace {ws} --platform PLATFORM --config FILE.json"


def _type_label(integration_type: str) -> str:
    return f"{integration_type} ({kind_of(integration_type).vendor})"


def _run_row(row: Any, by: str, at: datetime, count: int | None) -> dict[str, Any]:
    """A queue row as the history table (`integrations/_history.html`) and the status parts
    show it: a sync or a sync request alike."""
    return {
        "id": row.id,
        "by": by,
        "status": row.status,
        "at": iso_z(at),
        "started": iso_z(row.started_at),
        "finished": iso_z(row.finished_at),
        "duration": (row.finished_at - row.started_at).total_seconds() if row.finished_at and row.started_at else None,
        "count": count,
        "error_code": row.error_code,
        "error_message": row.error_message,
    }


def _sync_row(s: repo.Sync) -> dict[str, Any]:
    return {"sync": s, "queued": iso_z(s.queued_at), **_run_row(s, s.trigger, s.queued_at, s.records_written)}


def _status_context(conn: Any, integration: repo.Integration) -> dict[str, Any]:
    history = repo.sync_history(conn, integration_id=integration.id)
    pending = next((s for s in history if s.status in ACTIVE_SYNC_STATUSES), None)
    finished = next((s for s in history if s.status not in ACTIVE_SYNC_STATUSES), None)
    return {
        "integration": integration,
        "type_label": _type_label(integration.type),
        "last_synced": iso_z(integration.last_synced_at),
        "pending": _sync_row(pending) if pending else None,
        "finished": _sync_row(finished) if finished else None,
        "history": [_sync_row(s) for s in history],
        "can_sync": integration.status != "disconnected",
        "sync_consequence": sync_consequence(),
    }


def _stats(conn: Any, integration: repo.Integration) -> dict[str, Any]:
    stats = sync_stats(conn, state().settings.paths.lake(), integration, utcnow())
    return {
        "events_total": stats.events_total,
        "events_last_24h": stats.events_last_24h,
        "earliest": iso_z(stats.earliest_event_at),
        "produces": kind_of(integration.type).produces,
    }


def _account_row(conn: Any, a: accounts.AdAccount) -> dict[str, Any]:
    return {
        "account": a,
        "sandbox": a.platform == "sandbox",
        "vendor": platforms.kind_of(a.platform).vendor,
        "last_synced": iso_z(a.last_synced_at),
        "objects": len(accounts.entities(conn, ad_account_id=a.id)),
    }


@blueprint.get("/integrations")
def integrations() -> Response:
    with state().db.read() as conn:
        found = repo.list_integrations(conn, workspace_id=g.workspace_id)
        rows = [{**_status_context(conn, i), "stats": _stats(conn, i)} for i in found]
        ad_rows = [_account_row(conn, a) for a in accounts.list_accounts(conn, workspace_id=g.workspace_id)]
    return page(
        "dashboard/integrations/list.html",
        title="Integrations",
        section="integrations",
        rows=rows,
        ad_rows=ad_rows,
        types=[(t, kind_of(t).vendor) for t in INTEGRATION_TYPES],
        platforms=[(p, platforms.kind_of(p).vendor) for p in platforms.PLATFORMS],
        connect_command=CONNECT_COMMAND.format(ws=g.workspace_id),
        ad_account_command=AD_ACCOUNT_COMMAND.format(ws=g.workspace_id),
    )


def _detail(integration_id: str, *, status: int = 200, confirm: bool = False, notice: str | None = None) -> Response:
    with state().db.read() as conn:
        integration = repo.get_integration(conn, integration_id=integration_id, workspace_id=g.workspace_id)
        ctx = _status_context(conn, integration)
        stats = _stats(conn, integration)
    return page(
        "dashboard/integrations/detail.html",
        status,
        title=f"Integration {integration.type}",
        section="integrations",
        stats=stats,
        confirm=confirm,
        notice=notice,
        queued=request.args.get("queued"),
        options=integration.options,
        **ctx,
    )


@blueprint.get("/integrations/<integration_id>")
def integration(integration_id: str) -> Response:
    return _detail(integration_id)


def _integration_status(conn: Connection, integration_id: str) -> dict[str, Any]:
    found = repo.get_integration(conn, integration_id=integration_id, workspace_id=g.workspace_id)
    return _status_context(conn, found)


def _queue_sync(conn: Connection, integration_id: str) -> tuple[str, bool]:
    sync, created = repo.request_sync(
        conn, integration_id=integration_id, workspace_id=g.workspace_id, trigger="manual"
    )
    return sync.id, created


INTEGRATION_SYNC = SyncNow(
    endpoint="dashboard.integration",
    id_arg="integration_id",
    status_template="dashboard/integrations/_status.html",
    status_context=_integration_status,
    full_page=_detail,
    ask=_queue_sync,
    refused_notice=lambda refused: f"{refused} (flokit admin integrations connect --type TYPE --config FILE.json).",
    just_asked="just_queued",
    asked=lambda sync_id, _created: {"queued": sync_id},
)


INTEGRATION_SYNC.add_routes(blueprint, "/integrations/<integration_id>")


def ad_account_sync_consequence(sandbox: bool) -> str:
    """What the ad account's sync now dialog says will happen."""
    where = (
        "This is a sandbox: its platform is FloKit's own registry, so the sync only adds the objects that "
        "appeared in the workspace's spend and keeps what actions set; no ad platform is called"
        if sandbox
        else "Nothing on the ad platform changes: the sync only reads"
    )
    return (
        "A registry sync is requested; FloKit's daemon (under flokit up) starts it at its next sensor tick (every "
        f"{state().settings.sensor_interval_s} s). It reads every campaign, ad set or ad group and ad of the account "
        f"into FloKit's registry, maps them to the reports' labels and marks what is no longer listed. {where}. "
        "If a sync is already requested or running, that one is the answer and nothing new is requested."
    )


def _request_row(r: sync_requests.SyncRequest) -> dict[str, Any]:
    return {
        "request": r,
        "requested": iso_z(r.requested_at),
        **_run_row(r, r.requested_by, r.requested_at, r.objects_listed),
    }


def _account_status_context(conn: Any, account: accounts.AdAccount) -> dict[str, Any]:
    recent = sync_requests.recent_requests(conn, ad_account_id=account.id)
    return {
        "account": account,
        "sandbox": account.platform == "sandbox",
        "last_synced": iso_z(account.last_synced_at),
        "latest": _request_row(recent[0]) if recent else None,
        "requests": [_request_row(r) for r in recent],
        "can_sync": account.status != "disconnected",
        "sync_consequence": ad_account_sync_consequence(account.platform == "sandbox"),
    }


def _ad_account_page(
    ad_account_id: str, *, status: int = 200, confirm: bool = False, notice: str | None = None
) -> Response:
    with state().db.read() as conn:
        account = accounts.get_account(conn, ad_account_id=ad_account_id, workspace_id=g.workspace_id)
        objects = accounts.entities(conn, ad_account_id=account.id, include_removed=True)
        ctx = _account_status_context(conn, account)
    # Campaigns first, then what they hold (ENTITY_TYPES is in that order), each by name.
    rank = {t: i for i, t in enumerate(platforms.ENTITY_TYPES)}
    objects.sort(key=lambda e: (e.removed_at is not None, rank.get(e.entity_type, 99), e.name, e.external_id))
    rows = [
        {
            "e": e,
            "budget": major_text(e.daily_budget, e.currency) if e.daily_budget is not None and e.currency else None,
            "edited": iso_z(e.edited_at),
            "synced": iso_z(e.synced_at),
            "removed": iso_z(e.removed_at),
        }
        for e in objects
    ]
    return page(
        "dashboard/integrations/ad_account.html",
        status,
        title=f"Ad account {account.name}",
        section="integrations",
        vendor=platforms.kind_of(account.platform).vendor,
        rows=rows,
        live=sum(1 for r in rows if r["removed"] is None),
        confirm=confirm,
        notice=notice,
        requested=request.args.get("requested"),
        already=request.args.get("already") == "1",
        **ctx,
    )


@blueprint.get("/ad-accounts/<ad_account_id>")
def ad_account(ad_account_id: str) -> Response:
    return _ad_account_page(ad_account_id)


def _ad_account_status(conn: Connection, ad_account_id: str) -> dict[str, Any]:
    account = accounts.get_account(conn, ad_account_id=ad_account_id, workspace_id=g.workspace_id)
    return _account_status_context(conn, account)


def _request_sync(conn: Connection, ad_account_id: str) -> tuple[str, bool]:
    found, created = sync_requests.request_sync(
        conn, ad_account_id=ad_account_id, workspace_id=g.workspace_id, requested_by=g.operator
    )
    return found.id, created


AD_ACCOUNT_SYNC = SyncNow(
    endpoint="dashboard.ad_account",
    id_arg="ad_account_id",
    status_template="dashboard/integrations/_ad_account_status.html",
    status_context=_ad_account_status,
    full_page=_ad_account_page,
    ask=_request_sync,
    refused_notice=lambda refused: (
        f"{refused}: it has no credentials to sync with "
        "(flokit admin ad-accounts connect --platform PLATFORM --config FILE.json)."
    ),
    just_asked="just_requested",
    asked=lambda request_id, created: (
        {"requested": request_id} if created else {"requested": request_id, "already": "1"}
    ),
    refusal_in_status=True,
)


AD_ACCOUNT_SYNC.add_routes(blueprint, "/ad-accounts/<ad_account_id>")
