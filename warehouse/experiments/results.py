"""The `experiment_results` asset's reads and writes: which experiments to analyse and their
exposures, then each experiment's results stored for the API and the dashboard, and the
`experiment.srm_detected` event announced once per experiment.

The results are kept in the operational database, beside the experiment, because every API host
reads them per request and the alarm must be announced in the same transaction that first
records it (the outbox), so a crash between the two cannot lose or repeat it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import polars as pl
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from transforms.experiments.results import EXPOSURE_SCHEMA, ExperimentDefinition, ExperimentResult, VersionWeights
from transforms.experiments.statistics import SRM_ALPHA
from transforms.webhooks import payloads
from warehouse.db import utcnow
from warehouse.experiments import repository as repo
from warehouse.experiments.repository import Experiment
from warehouse.experiments.tables import experiment_exposures as ex
from warehouse.experiments.tables import experiment_results as er
from warehouse.experiments.tables import experiments as e
from warehouse.webhooks.outbox import emit_event


@dataclass(frozen=True)
class Analysed:
    experiment: Experiment
    definition: ExperimentDefinition


def analysed(conn: Connection) -> list[Analysed]:
    """Every experiment that has started (running or stopped: a stopped one's exposed users keep
    maturing, so its D14 and D30 revenue keep filling in), with the split of each version."""
    rows = conn.execute(sa.select(e).where(e.c.started_at.is_not(None)).order_by(e.c.workspace_id, e.c.id)).all()
    found = []
    for row in rows:
        experiment = repo.get(conn, row.workspace_id, row.id)
        assert experiment.started_at is not None
        splits = repo.versions(conn, experiment.id)
        definition = ExperimentDefinition(
            experiment_id=experiment.id,
            variant_ids=tuple(v.variant_id for v in experiment.variants),
            primary_metric=experiment.primary_metric,
            started_at=experiment.started_at,
            versions={n: VersionWeights(variants, holdout) for n, (variants, holdout) in splits.items()},
        )
        found.append(Analysed(experiment, definition))
    return found


def exposures_frame(conn: Connection, experiments: Sequence[Experiment]) -> pl.DataFrame:
    """The exposures of these experiments (`EXPOSURE_SCHEMA`)."""
    apps = {x.id: x.app_id for x in experiments}
    rows = (
        conn.execute(
            sa.select(
                ex.c.experiment_id, ex.c.user_id, ex.c.variant_id, ex.c.experiment_version, ex.c.exposed_at
            ).where(ex.c.experiment_id.in_(list(apps)))
        ).all()
        if apps
        else []
    )
    return pl.DataFrame(
        [(r.experiment_id, apps[r.experiment_id], r.user_id, r.variant_id, r.experiment_version, r.exposed_at)
         for r in rows],
        schema=EXPOSURE_SCHEMA,
        orient="row",
    )  # fmt: skip


def store(conn: Connection, experiment: Experiment, result: ExperimentResult) -> bool:
    """Keep the experiment's results (replacing the previous refresh's); announce
    `experiment.srm_detected` the first time its sample-ratio check is flagged. Returns whether
    it was announced now."""
    document = result.document()
    flagged = bool(result.srm.flagged)
    values: dict[str, Any] = {"as_of": result.as_of, "results": document, "srm_flagged": flagged}
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    conn.execute(
        dialect.insert(er)
        .values(experiment_id=experiment.id, srm_announced_at=None, **values)
        .on_conflict_do_update(index_elements=["experiment_id"], set_=values)
    )
    if not flagged:
        return False
    claimed = conn.execute(
        sa.update(er)
        .where(er.c.experiment_id == experiment.id, er.c.srm_announced_at.is_(None))
        .values(srm_announced_at=utcnow())
    )
    if claimed.rowcount != 1:
        return False  # announced by an earlier refresh
    srm: payloads.SrmData = {
        "p_value": float(result.srm.p_value),
        "threshold": SRM_ALPHA,  # for the look-corrected p_value
        "observed": {k: int(v) for k, v in result.srm.observed.items()},
        "expected": {k: float(v) for k, v in result.srm.expected.items()},
    }
    emit_event(
        conn,
        workspace_id=experiment.workspace_id,
        event_type="experiment.srm_detected",
        data=repo.event_data(experiment, srm),
    )
    return True


@dataclass(frozen=True)
class Stored:
    as_of: datetime
    results: dict[str, Any]
    srm_flagged: bool


def stored(conn: Connection, experiment_ids: Sequence[str]) -> dict[str, Stored]:
    """The last refresh's results of these experiments (those it has computed)."""
    if not experiment_ids:
        return {}
    rows = conn.execute(sa.select(er).where(er.c.experiment_id.in_(list(experiment_ids)))).all()
    return {r.experiment_id: Stored(r.as_of, r.results, bool(r.srm_flagged)) for r in rows}
