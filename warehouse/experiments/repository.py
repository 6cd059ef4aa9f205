"""Experiments: create, read, change, start, stop and ship them; record and read exposures.

Every rule is `transforms.experiments.model`'s; this module keeps the rows. A transition is one
conditional UPDATE on the status it leaves, so two simultaneous starts give one start and one
refusal (409), on SQLite and PostgreSQL alike. A first exposure is an insert that does nothing when
the user already has one: the first writer wins and every later read returns its variant.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from transforms import paywall
from transforms.experiments.assignment import Weighted
from transforms.experiments.model import (
    DefinitionProblem,
    Metric,
    Status,
    check_holdout,
    check_variants,
    check_weights_change,
    refused,
)
from transforms.ids import new_id
from transforms.webhooks import payloads
from warehouse import audit
from warehouse.db import utcnow
from warehouse.entitlements.tables import entitlement_grants as g
from warehouse.errors import NotFound, TransitionRefused
from warehouse.experiments.tables import experiment_exposures as ex
from warehouse.experiments.tables import experiment_versions as ev
from warehouse.experiments.tables import experiments as e
from warehouse.paywalls import configs
from warehouse.tables import apps
from warehouse.webhooks.outbox import emit_event


@dataclass(frozen=True)
class Experiment:
    id: str
    workspace_id: str
    app_id: str
    paywall_id: str
    name: str
    status: Status
    variants: tuple[Weighted, ...]
    holdout_pct: float
    primary_metric: Metric
    audience: dict[str, Any] | None
    priority: int
    salt: bytes | None  # None: a migrated `experiment_active` document's per-paywall buckets
    version: int
    created_by: str
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    stopped_at: datetime | None
    shipped_variant_id: str | None


@dataclass(frozen=True)
class Exposure:
    variant_id: str
    version: int
    exposed_at: datetime


def _variants(raw: Sequence[dict[str, Any]]) -> tuple[Weighted, ...]:
    return tuple(Weighted(str(v["variant_id"]), float(v["weight"])) for v in raw)


def _stored(variants: Sequence[Weighted]) -> list[dict[str, Any]]:
    return [{"variant_id": v.variant_id, "weight": v.weight} for v in variants]


def _experiment(row: Any) -> Experiment:
    return Experiment(
        id=row.id,
        workspace_id=row.workspace_id,
        app_id=row.app_id,
        paywall_id=row.paywall_id,
        name=row.name,
        status=row.status,
        variants=_variants(row.variants),
        holdout_pct=row.holdout_pct,
        primary_metric=row.primary_metric,
        audience=row.audience,
        priority=row.priority,
        salt=bytes.fromhex(row.salt) if row.salt else None,
        version=row.version,
        created_by=row.created_by,
        created_at=row.created_at,
        updated_at=row.updated_at,
        started_at=row.started_at,
        stopped_at=row.stopped_at,
        shipped_variant_id=row.shipped_variant_id,
    )


def _published_ids(conn: Connection, app_id: str, paywall_id: str) -> list[str] | None:
    live = configs.live(conn, app_id=app_id, paywall_id=paywall_id)
    return None if live is None else [v.variant_id for v in live.document.variants]


def create(
    conn: Connection,
    *,
    workspace_id: str,
    app_id: str,
    paywall_id: str,
    name: str,
    variants: Sequence[Weighted],
    holdout_pct: float,
    primary_metric: Metric,
    audience: dict[str, Any] | None,
    priority: int,
    actor: str,
) -> Experiment:
    """A new experiment in `draft`, with its own random salt. Raises NotFound for an app outside
    the workspace, DefinitionProblem for a definition the rules refuse."""
    app = conn.execute(
        sa.select(apps.c.id).where(
            apps.c.id == app_id, apps.c.workspace_id == workspace_id, apps.c.revoked_at.is_(None)
        )
    ).first()
    if app is None:
        raise NotFound(f"No app {app_id} in this workspace.")
    check_variants(variants, _published_ids(conn, app_id, paywall_id))
    check_holdout(holdout_pct)
    now = utcnow()
    experiment_id = new_id("exp")
    conn.execute(
        e.insert().values(
            id=experiment_id, workspace_id=workspace_id, app_id=app_id, paywall_id=paywall_id, name=name,
            status="draft", variants=_stored(variants), holdout_pct=holdout_pct, primary_metric=primary_metric,
            audience=audience, priority=priority, salt=secrets.token_bytes(16).hex(), version=1,
            created_by=actor, created_at=now, updated_at=now,
        )
    )  # fmt: skip
    conn.execute(
        ev.insert().values(
            experiment_id=experiment_id,
            version=1,
            variants=_stored(variants),
            holdout_pct=holdout_pct,
            effective_at=now,
        )
    )
    audit.record(
        conn, workspace_id=workspace_id, actor=actor, action="experiment.created", subject_id=experiment_id,
        detail={"app_id": app_id, "paywall_id": paywall_id, "variants": _stored(variants)},
    )  # fmt: skip
    return get(conn, workspace_id, experiment_id)


def get(conn: Connection, workspace_id: str, experiment_id: str, *, for_update: bool = False) -> Experiment:
    """One experiment of the workspace; NotFound otherwise (another workspace's included)."""
    query = sa.select(e).where(e.c.id == experiment_id, e.c.workspace_id == workspace_id)
    row = conn.execute(query.with_for_update() if for_update else query).first()
    if row is None:
        raise NotFound(f"No experiment {experiment_id} in this workspace.")
    return _experiment(row)


def listed(
    conn: Connection,
    workspace_id: str,
    *,
    app_id: str | None = None,
    paywall_id: str | None = None,
    status: Status | None = None,
) -> list[Experiment]:
    """The workspace's experiments, newest first."""
    query = sa.select(e).where(e.c.workspace_id == workspace_id)
    for column, value in ((e.c.app_id, app_id), (e.c.paywall_id, paywall_id), (e.c.status, status)):
        if value is not None:
            query = query.where(column == value)
    return [_experiment(r) for r in conn.execute(query.order_by(e.c.created_at.desc(), e.c.id))]


def versions(conn: Connection, experiment_id: str) -> dict[int, tuple[tuple[Weighted, ...], float]]:
    """Each version's split (variants and holdout), what exposures of that version were drawn from."""
    rows = conn.execute(sa.select(ev).where(ev.c.experiment_id == experiment_id)).all()
    return {r.version: (_variants(r.variants), r.holdout_pct) for r in rows}


UNSET: Any = object()


def update(
    conn: Connection,
    workspace_id: str,
    experiment_id: str,
    *,
    actor: str,
    name: str | None = None,
    variants: Sequence[Weighted] | None = None,
    audience: dict[str, Any] | None = UNSET,
    priority: int | None = None,
) -> Experiment:
    """Change the name, the variants' weights, the audience or the priority. A new split is a new
    version: users already exposed keep their variant, new ones follow the new weights."""
    current = get(conn, workspace_id, experiment_id, for_update=True)
    values: dict[str, Any] = {}
    if name is not None:
        values["name"] = name
    if variants is not None and tuple(variants) != current.variants:
        check_weights_change(current.variants, variants, current.status)
        check_variants(variants, _published_ids(conn, current.app_id, current.paywall_id))
        values |= {"variants": _stored(variants), "version": current.version + 1}
    if current.status == "stopped" and (audience is not UNSET or priority is not None):
        raise DefinitionProblem("status", "a stopped experiment's audience and priority cannot change")
    if audience is not UNSET:
        values["audience"] = audience
    if priority is not None:
        values["priority"] = priority
    if not values:
        return current
    now = utcnow()
    conn.execute(sa.update(e).where(e.c.id == experiment_id).values(**values, updated_at=now))
    if "version" in values:
        conn.execute(
            ev.insert().values(
                experiment_id=experiment_id, version=values["version"], variants=values["variants"],
                holdout_pct=current.holdout_pct, effective_at=now,
            )
        )  # fmt: skip
    audit.record(
        conn, workspace_id=workspace_id, actor=actor, action="experiment.updated", subject_id=experiment_id,
        detail={k: v for k, v in values.items() if k != "version"},
    )  # fmt: skip
    return get(conn, workspace_id, experiment_id)


def transition(
    conn: Connection, workspace_id: str, experiment_id: str, action: str, *, actor: str, now: datetime | None = None
) -> Experiment:
    """start (draft → running) or stop (running → stopped): one conditional UPDATE, so of two
    simultaneous calls one moves it and the other is refused (TransitionRefused: 409)."""
    current = get(conn, workspace_id, experiment_id)
    why = refused(action, current.status)
    if why is not None:
        raise TransitionRefused(why, current.status)
    now = now or utcnow()
    stamp = {"started_at": now} if action == "start" else {"stopped_at": now}
    source, target = ("draft", "running") if action == "start" else ("running", "stopped")
    moved = conn.execute(
        sa.update(e).where(e.c.id == experiment_id, e.c.status == source).values(status=target, updated_at=now, **stamp)
    )
    if moved.rowcount != 1:
        latest = get(conn, workspace_id, experiment_id)
        raise TransitionRefused(refused(action, latest.status) or f"cannot {action}", latest.status)
    done = "started" if action == "start" else "stopped"
    audit.record(
        conn, workspace_id=workspace_id, actor=actor, action=f"experiment.{done}", subject_id=experiment_id,
        detail={"from": source, "to": target},
    )  # fmt: skip
    moved_to = get(conn, workspace_id, experiment_id)
    emit_event(conn, workspace_id=workspace_id, event_type=f"experiment.{done}", data=event_data(moved_to))
    return moved_to


def event_data(x: Experiment, srm: payloads.SrmData | None = None) -> payloads.ExperimentEventData:
    """The `experiment.*` webhook events' data."""
    summary = payloads.experiment_summary(
        id=x.id, app_id=x.app_id, paywall_id=x.paywall_id, name=x.name, status=x.status,
        primary_metric=x.primary_metric, started_at=x.started_at, stopped_at=x.stopped_at,
        shipped_variant_id=x.shipped_variant_id,
    )  # fmt: skip
    return payloads.experiment_event(summary, srm)


def ship(
    conn: Connection, workspace_id: str, experiment_id: str, variant_id: str, *, actor: str, evidence: dict[str, Any]
) -> tuple[Experiment, configs.Published]:
    """Publish `variant_id` as the paywall's default configuration (a new version with that variant
    first and no `experiment_active`), and stop the experiment; audited with `evidence` (the
    results at that moment)."""
    current = get(conn, workspace_id, experiment_id, for_update=True)
    why = refused("ship", current.status)
    if why is not None:
        raise TransitionRefused(why, current.status)
    if variant_id not in {v.variant_id for v in current.variants}:
        raise DefinitionProblem("variant_id", f"{variant_id!r} is not a variant of this experiment")
    live = configs.live(conn, app_id=current.app_id, paywall_id=current.paywall_id)
    if live is None or variant_id not in {v.variant_id for v in live.document.variants}:
        raise DefinitionProblem("variant_id", f"{variant_id!r} is no longer in the paywall's published configuration")
    chosen = [v for v in live.document.variants if v.variant_id == variant_id]
    others = [v for v in live.document.variants if v.variant_id != variant_id]
    document = paywall.PaywallDocument(experiment_active=False, variants=[*chosen, *others])
    published = configs.publish(
        conn, app_id=current.app_id, paywall_id=current.paywall_id, document=document, actor=actor
    )
    conn.execute(sa.update(e).where(e.c.id == experiment_id).values(shipped_variant_id=variant_id))
    stopped = transition(conn, workspace_id, experiment_id, "stop", actor=actor)  # its event names the winner
    audit.record(
        conn, workspace_id=workspace_id, actor=actor, action="experiment.shipped", subject_id=experiment_id,
        detail={"variant_id": variant_id, "paywall_version": published.version, "results": evidence},
    )  # fmt: skip
    return stopped, published


@dataclass(frozen=True)
class PaywallExperiments:
    """What the gateway needs of one paywall's experiments: the running ones in the order they are
    tried (priority, then the oldest first), and whether it has any at all (then the document's
    `experiment_active` switch no longer splits: the experiments do)."""

    running: tuple[Experiment, ...]
    any: bool
    # Per running experiment, the split of each of its versions (what its exposures were drawn from).
    splits: dict[str, tuple[tuple[tuple[Weighted, ...], float], ...]]


def for_paywall(conn: Connection, app_id: str, paywall_id: str) -> PaywallExperiments:
    rows = conn.execute(sa.select(e).where(e.c.app_id == app_id, e.c.paywall_id == paywall_id)).all()
    found = [_experiment(r) for r in rows]
    running = sorted((x for x in found if x.status == "running"), key=lambda x: (x.priority, x.created_at, x.id))
    splits = {x.id: tuple(versions(conn, x.id).values()) for x in running}
    return PaywallExperiments(tuple(running), bool(found), splits)


def exposure(conn: Connection, experiment_id: str, user_id: str) -> Exposure | None:
    row = conn.execute(
        sa.select(ex.c.variant_id, ex.c.experiment_version, ex.c.exposed_at).where(
            ex.c.experiment_id == experiment_id, ex.c.user_id == user_id
        )
    ).first()
    return None if row is None else Exposure(row.variant_id, row.experiment_version, row.exposed_at)


def record_exposures(
    conn: Connection, rows: Sequence[dict[str, Any]], read_back: Sequence[tuple[str, str]] | None = None
) -> dict[tuple[str, str], str]:
    """Record first exposures (experiment_id, user_id, variant_id, experiment_version, exposed_at),
    each unless the user already has one; returns the recorded variant (the earlier one where it
    existed: it wins) of the `read_back` pairs (default: every row's)."""
    if not rows:
        return {}
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    for i in range(0, len(rows), 500):
        conn.execute(
            dialect.insert(ex).on_conflict_do_nothing(index_elements=["experiment_id", "user_id"]), rows[i : i + 500]
        )
    pairs = sorted({(r["experiment_id"], r["user_id"]) for r in rows} if read_back is None else set(read_back))
    recorded: dict[tuple[str, str], str] = {}
    for i in range(0, len(pairs), 400):
        chunk = pairs[i : i + 400]
        found = conn.execute(
            sa.select(ex.c.experiment_id, ex.c.user_id, ex.c.variant_id).where(
                sa.tuple_(ex.c.experiment_id, ex.c.user_id).in_(chunk)
            )
        )
        recorded |= {(r.experiment_id, r.user_id): r.variant_id for r in found}
    return recorded


def exposures(conn: Connection, experiment_ids: Sequence[str]) -> list[Any]:
    """Every exposure of these experiments (the results' input)."""
    if not experiment_ids:
        return []
    return list(conn.execute(sa.select(ex).where(ex.c.experiment_id.in_(list(experiment_ids)))).all())


def first_seen(conn: Connection, app_id: str, user_id: str) -> datetime | None:
    """When FloKit first saw the user in the app, as the operational database knows it: the
    earliest of their first purchase in the ledger and their first exposure to any of the app's
    experiments (None: neither). The lake's events know more, but are not read on the gateway's
    hot path."""
    purchase = conn.execute(
        sa.select(sa.func.min(g.c.created_at)).where(g.c.app_id == app_id, g.c.user_id == user_id)
    ).scalar()
    exposed = conn.execute(
        sa.select(sa.func.min(ex.c.exposed_at))
        .join(e, e.c.id == ex.c.experiment_id)
        .where(e.c.app_id == app_id, ex.c.user_id == user_id)
    ).scalar()
    found = [t for t in (purchase, exposed) if t is not None]
    return min(found) if found else None
