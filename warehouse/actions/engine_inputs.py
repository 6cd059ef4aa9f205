"""What the actions engine reads besides the policy: signals (lake), registry, open actions, history.

The engine step (`orchestration.actions.engine`) and the API's evaluation of created actions read
the same inputs through these functions, so both decide on the same numbers.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any

import polars as pl
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from transforms.actions import OPEN_STATUSES
from transforms.actions import proposals as gen
from warehouse.actions import repository as repo
from warehouse.actions.policy import policy_for
from warehouse.actions.tables import action_evaluations, action_transitions, actions
from warehouse.adaccounts.repository import workspace_entities
from warehouse.lake import Lake
from warehouse.reports.report_lake import ACTION_SIGNALS, last_day, partition_days, scan_days
from warehouse.tables import workspaces


def workspace_ids_for_operator(conn: Connection) -> list[str]:
    """Every workspace, in id order: the engine's operator path evaluates each in turn."""
    return list(conn.execute(sa.select(workspaces.c.id).order_by(workspaces.c.id)).scalars())


def read_signals(lake: Lake, workspace_id: str, through: date) -> pl.DataFrame:
    first = through - timedelta(days=gen.SIGNAL_LOOKBACK_DAYS)
    days = [d for d in partition_days(lake, ACTION_SIGNALS) if first <= d <= through]
    if not days:
        return pl.DataFrame()
    return scan_days(lake, ACTION_SIGNALS, days).filter(pl.col("workspace_id") == workspace_id).collect()


def registry_snapshot(conn: Connection, workspace_id: str) -> dict[str, gen.RegistryCampaign]:
    """Report campaign label → its registry object: the campaign's own budget, else the sum of its
    ad sets' (Meta's ad-set budgets); ads / ad groups by their creative label. A label that maps to
    objects of several accounts is left out (v1 moves budget inside one account)."""
    rows = workspace_entities(conn, workspace_id=workspace_id)
    campaigns: dict[str, list[Any]] = {}
    for account, e in rows:
        if e.entity_type == "campaign" and e.report_campaign:
            campaigns.setdefault(e.report_campaign, []).append((account, e))
    out: dict[str, gen.RegistryCampaign] = {}
    for label, found in sorted(campaigns.items()):
        if len(found) != 1:
            continue
        account, camp = found[0]
        children = [e for a, e in rows if a.id == account.id and e.parent_external_id == camp.external_id]
        budget, currency = camp.daily_budget, camp.currency
        if budget is None:
            sets = [e for e in children if e.daily_budget is not None]
            if sets and len({e.currency for e in sets}) == 1:
                budget, currency = sum(e.daily_budget or 0 for e in sets), sets[0].currency
        ids = {camp.external_id} | {e.external_id for e in children}
        creatives = {
            e.report_creative: e.status
            for a, e in rows
            if a.id == account.id and e.report_creative and e.parent_external_id in ids and e.entity_type != "campaign"
        }
        out[label] = gen.RegistryCampaign(
            name=label,
            ad_account_id=account.id,
            platform=account.platform,
            daily_budget_minor=budget,
            currency=currency,
            status=camp.status,
            edited_at=camp.edited_at,
            creatives=creatives,
        )
    return out


def open_actions(conn: Connection, workspace_id: str) -> list[repo.Action]:
    rows = conn.execute(
        sa.select(actions.c.id)
        .where(actions.c.workspace_id == workspace_id, actions.c.status.in_(OPEN_STATUSES))
        .order_by(actions.c.created_at, actions.c.id)
    ).scalars()
    return [repo.get_action(conn, workspace_id=workspace_id, action_id=i) for i in rows]


def evaluation_details(conn: Connection, action_id: str) -> list[dict[str, Any]]:
    """The action's evaluations' details, newest first (proposal and revalidations)."""
    rows = conn.execute(
        sa.select(action_evaluations.c.detail, action_evaluations.c.data_as_of)
        .where(
            action_evaluations.c.action_id == action_id,
            action_evaluations.c.kind.in_(["proposal", "revalidation", "create"]),
        )
        .order_by(action_evaluations.c.id.desc())
    ).all()
    return [{**(r.detail or {}), "_data_as_of": r.data_as_of} for r in rows]


def history(
    conn: Connection, workspace_id: str, now: datetime, policy_days: int
) -> tuple[list[gen.Rejection], dict[str, datetime]]:
    """Human rejections (with the rejected proposal's sample) and entity cooldowns (§5.4)."""
    since = now - timedelta(days=max(policy_days, 60))
    rejected = conn.execute(
        sa.select(actions.c.id, actions.c.fingerprint, actions.c.rejected_at)
        .select_from(actions.join(action_transitions, action_transitions.c.action_id == actions.c.id))
        .where(
            actions.c.workspace_id == workspace_id,
            actions.c.status == "rejected",
            actions.c.fingerprint.is_not(None),
            actions.c.rejected_at >= since,
            action_transitions.c.trigger == "reject",
        )
    ).all()
    rejections = []
    for r in rejected:
        details = evaluation_details(conn, r.id)
        sample = next((int(d["sample"]) for d in details if isinstance(d.get("sample"), int)), 0)
        rejections.append(gen.Rejection(r.fingerprint, r.rejected_at, sample))
    ended = conn.execute(
        sa.select(actions.c.type, actions.c.parameters, actions.c.completed_at, actions.c.rolled_back_at).where(
            actions.c.workspace_id == workspace_id,
            actions.c.status.in_(["completed", "rolled_back"]),
            sa.or_(actions.c.completed_at >= since, actions.c.rolled_back_at >= since),
        )
    ).all()
    cooldowns: dict[str, datetime] = {}
    for row in ended:
        at = max(t for t in (row.completed_at, row.rolled_back_at) if t is not None)
        for name in gen.entities_of(row.type, row.parameters):
            cooldowns[name] = max(cooldowns.get(name, at), at)
    return rejections, cooldowns


def load(conn: Connection, lake: Lake, workspace_id: str, now: datetime) -> tuple[pl.DataFrame, gen.Context] | None:
    """The signals and the context one evaluation of the workspace reads; None before any data.

    The engine step and `POST /v1/actions` with parameters both start here, so an action a client
    proposes is checked against exactly what the engine would have seen at that moment."""
    through = last_day(lake)
    if through is None:
        return None
    signals = read_signals(lake, workspace_id, through)
    policy = policy_for(conn, workspace_id=workspace_id)
    rejections, cooldowns = history(conn, workspace_id, now, policy.suppress_after_reject_days)
    held = [
        gen.OpenAction(a.id, a.type, a.status, a.fingerprint, gen.entities_of(a.type, a.parameters))
        for a in open_actions(conn, workspace_id)
    ]
    ctx = gen.Context(
        workspace_id=workspace_id,
        as_of=now,
        data_through=through,
        policy=policy,
        registry=registry_snapshot(conn, workspace_id),
        open_actions=held,
        rejections=rejections,
        cooldowns=cooldowns,
    )
    return signals, ctx
