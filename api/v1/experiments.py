"""Paywall experiments (issue 35, preview): create, list, read, change, start, stop, ship.

The rules are `transforms.experiments.model`'s, the rows `warehouse.experiments.repository`'s.
A transition from the wrong status is 409 (`warehouse.errors.TransitionRefused`, answered by
api/errors.py); a definition the rules refuse is 400 naming the field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from flask import Response
from pydantic import BaseModel, ConfigDict, Field

from api.auth import principal, require_key
from api.context import state
from api.errors import ApiError
from api.openapi import operation
from api.responses import respond
from api.v1 import blueprint
from api.validators import Id, path_id
from transforms.experiments import audience as audiences
from transforms.experiments.assignment import Weighted
from transforms.experiments.model import (
    MAX_VARIANTS,
    MAX_WEIGHT,
    MIN_VARIANTS,
    NAME_MAX,
    DefinitionProblem,
    Metric,
    Status,
)
from transforms.timefmt import iso_z
from warehouse.experiments import repository as repo
from warehouse.experiments import results as experiment_store
from warehouse.experiments.repository import Experiment
from warehouse.experiments.results import Stored
from warehouse.paywalls.configs import MAX_PAYWALL_ID

PREVIEW = "Preview (issue 35): the shape may still change. "
Timestamp = Annotated[str, Field(json_schema_extra={"format": "date-time"})]


class _Body(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")  # typed as sent, unknown fields refused


class ExperimentVariantWeight(_Body):
    variant_id: str = Field(
        min_length=1, max_length=100, description="A variant of the paywall's published configuration."
    )
    weight: float = Field(ge=0, le=MAX_WEIGHT, description="Relative: 50/50 and 1/1 split alike; 0 admits no new user.")


class ExperimentCreateBody(_Body):
    app_id: Id
    paywall_id: str = Field(min_length=1, max_length=MAX_PAYWALL_ID)
    name: str = Field(min_length=1, max_length=NAME_MAX)
    variants: list[ExperimentVariantWeight] = Field(
        min_length=MIN_VARIANTS, max_length=MAX_VARIANTS, description="The first is the control."
    )
    holdout_pct: float = Field(0.0, ge=0, le=90, description="Percent of entrants served the paywall's default.")
    primary_metric: Metric = "paid_conversion_rate"
    audience: dict[str, Any] | None = Field(None, description="Conditions that must all hold; null: everyone.")
    priority: int = Field(0, ge=-1_000_000, le=1_000_000, description="Lower is tried first.")


class ExperimentPatchBody(_Body):
    name: str | None = Field(None, min_length=1, max_length=NAME_MAX)
    variants: list[ExperimentVariantWeight] | None = Field(None, min_length=MIN_VARIANTS, max_length=MAX_VARIANTS)
    audience: dict[str, Any] | None = None
    priority: int | None = Field(None, ge=-1_000_000, le=1_000_000)


class ExperimentShipBody(_Body):
    variant_id: str = Field(min_length=1, max_length=100)


class ExperimentListQuery(BaseModel):
    app_id: Id | None = None
    paywall_id: str | None = Field(None, max_length=MAX_PAYWALL_ID)
    status: Status | None = None


class ExperimentLift(BaseModel):
    mean: float | None
    ci_low: float | None
    ci_high: float | None


class ExperimentVariantResult(BaseModel):
    variant_id: str
    exposed_users: int
    trial_starts: int
    paid_conversions: int
    refunds: int
    revenue_per_user_d7: float | None
    revenue_per_user_d14: float | None
    revenue_per_user_d30: float | None
    primary_metric_value: float | None
    lift_vs_control: ExperimentLift | None
    chance_to_beat_control: float | None
    chance_to_be_best: float | None
    expected_loss: float | None


class ExperimentSrm(BaseModel):
    p_value: float | None = Field(description="Corrected for the refreshes' repeated looks (docs/metrics.md).")
    flagged: bool = Field(description="p_value below 0.001 with at least 100 expected users in every cell.")
    raw_p_value: float | None = Field(description="The χ² test's own p-value at this look (preview extension).")
    observed: dict[str, int] = Field(description="Exposed users per cell, the holdout included (extension).")
    expected: dict[str, float | None] = Field(description="Expected under the weights of each exposure's version.")


class ExperimentResults(BaseModel):
    as_of: Timestamp
    srm: ExperimentSrm
    variants: list[ExperimentVariantResult]


class ExperimentBody(BaseModel):
    id: str
    app_id: str
    paywall_id: str
    name: str
    status: Status
    variants: list[ExperimentVariantWeight]
    holdout_pct: float
    primary_metric: Metric
    audience: dict[str, Any] | None
    priority: int
    version: int = Field(description="Counts the changes of the split; exposures record the version they drew from.")
    created_at: Timestamp
    started_at: Timestamp | None
    stopped_at: Timestamp | None
    shipped_variant_id: str | None
    results: ExperimentResults | None = Field(
        description="As of the last refresh; null before one has seen the experiment."
    )


class ExperimentEnvelope(BaseModel):
    experiment: ExperimentBody


class ExperimentList(BaseModel):
    experiments: list[ExperimentBody]


def _body(x: Experiment, results: Stored | None = None) -> dict[str, Any]:
    return {
        "id": x.id, "app_id": x.app_id, "paywall_id": x.paywall_id, "name": x.name, "status": x.status,
        "variants": [{"variant_id": v.variant_id, "weight": v.weight} for v in x.variants],
        "holdout_pct": x.holdout_pct, "primary_metric": x.primary_metric, "audience": x.audience,
        "priority": x.priority, "version": x.version, "created_at": iso_z(x.created_at),
        "started_at": iso_z(x.started_at), "stopped_at": iso_z(x.stopped_at),
        "shipped_variant_id": x.shipped_variant_id, "results": results.results if results else None,
    }  # fmt: skip


def _envelope(conn: Any, x: Experiment) -> ExperimentEnvelope:
    """The experiment with the last refresh's results."""
    results = experiment_store.stored(conn, [x.id]).get(x.id)
    return ExperimentEnvelope.model_validate({"experiment": _body(x, results)})


def _audience(raw: dict[str, Any] | None) -> dict[str, Any] | None:
    """The audience as stored: validated by the same model the gateway evaluates with."""
    try:
        parsed = audiences.parse_audience(raw)
    except audiences.InvalidAudience as exc:
        raise ApiError(400, f"Invalid body field '{exc.field}': {exc.message}") from None
    return None if parsed is None else parsed.model_dump(mode="json", exclude_none=True)


def _weights(variants: list[ExperimentVariantWeight]) -> list[Weighted]:
    return [Weighted(v.variant_id, v.weight) for v in variants]


def _refused(exc: DefinitionProblem) -> ApiError:
    return ApiError(400, f"Invalid body field '{exc.field}': {exc.message}")


@blueprint.post("/experiments")
@require_key(write=True)
@operation(
    summary="Create a paywall experiment (draft)",
    description=PREVIEW
    + "The variant_ids name variants of the paywall's published configuration; the first is the control. "
    "Created in draft with its own random salt, so it buckets users independently of earlier experiments.",
    body=ExperimentCreateBody,
    responses={201: ExperimentEnvelope},
    errors=(404,),
    tags=["experiments"],
)
def create_experiment(body: ExperimentCreateBody) -> Response:
    audience = _audience(body.audience)
    who = principal()
    try:
        with state().db.write() as conn:
            created = repo.create(
                conn, workspace_id=who.workspace_id, app_id=body.app_id, paywall_id=body.paywall_id, name=body.name,
                variants=_weights(body.variants), holdout_pct=body.holdout_pct, primary_metric=body.primary_metric,
                audience=audience, priority=body.priority, actor=who.key_id,
            )  # fmt: skip
    except DefinitionProblem as exc:
        raise _refused(exc) from None
    location = f"/v1/experiments/{created.id}"
    return respond(ExperimentEnvelope.model_validate({"experiment": _body(created)}), 201, {"Location": location})


@blueprint.get("/experiments")
@require_key()
@operation(
    summary="List experiments",
    description=PREVIEW + "Newest first; filtered by app, paywall and status.",
    query=ExperimentListQuery,
    responses={200: ExperimentList},
    tags=["experiments"],
)
def list_experiments(query: ExperimentListQuery) -> Response:
    with state().db.read() as conn:
        found = repo.listed(
            conn, principal().workspace_id, app_id=query.app_id, paywall_id=query.paywall_id, status=query.status
        )
        results = experiment_store.stored(conn, [x.id for x in found])
    return respond(ExperimentList.model_validate({"experiments": [_body(x, results.get(x.id)) for x in found]}))


@blueprint.get("/experiments/<experiment_id>")
@require_key()
@operation(
    summary="One experiment with its results",
    description=PREVIEW + "results are those of the last refresh (as_of), null before one has seen the experiment.",
    responses={200: ExperimentEnvelope},
    path_params={"experiment_id": path_id()},
    tags=["experiments"],
)
def read_experiment(experiment_id: str) -> Response:
    with state().db.read() as conn:
        answer = _envelope(conn, repo.get(conn, principal().workspace_id, experiment_id))
    return respond(answer)


@blueprint.patch("/experiments/<experiment_id>")
@require_key(write=True)
@operation(
    summary="Change an experiment's name, weights, audience or priority",
    description=PREVIEW
    + "While running, new weights (and added variants) apply to users not yet exposed: an exposed user keeps "
    "their variant for the experiment's life. A running experiment keeps its variants and control (a weight of "
    "0 admits no one new); a stopped one changes only its name.",
    body=ExperimentPatchBody,
    responses={200: ExperimentEnvelope},
    path_params={"experiment_id": path_id()},
    tags=["experiments"],
)
def update_experiment(experiment_id: str, body: ExperimentPatchBody) -> Response:
    changes: dict[str, Any] = {}
    if "audience" in body.model_fields_set:
        changes["audience"] = _audience(body.audience)
    who = principal()
    try:
        with state().db.write() as conn:
            updated = repo.update(
                conn, who.workspace_id, experiment_id, actor=who.key_id, name=body.name,
                variants=_weights(body.variants) if body.variants is not None else None, priority=body.priority,
                **changes,
            )  # fmt: skip
            answer = _envelope(conn, updated)
    except DefinitionProblem as exc:
        raise _refused(exc) from None
    return respond(answer)


def _transition(experiment_id: str, action: Literal["start", "stop"]) -> Response:
    who = principal()
    with state().db.write() as conn:
        moved = repo.transition(conn, who.workspace_id, experiment_id, action, actor=who.key_id)
        answer = _envelope(conn, moved)
    return respond(answer)


@blueprint.post("/experiments/<experiment_id>/start")
@require_key(write=True)
@operation(
    summary="Start an experiment (draft → running)",
    description=PREVIEW + "409 from any other status. Only users exposed from now on are analysed.",
    responses={200: ExperimentEnvelope},
    errors=(409,),
    path_params={"experiment_id": path_id()},
    tags=["experiments"],
)
def start_experiment(experiment_id: str) -> Response:
    return _transition(experiment_id, "start")


@blueprint.post("/experiments/<experiment_id>/stop")
@require_key(write=True)
@operation(
    summary="Stop an experiment (running → stopped)",
    description=PREVIEW + "409 from any other status. Everyone returns to the paywall's default; results are kept.",
    responses={200: ExperimentEnvelope},
    errors=(409,),
    path_params={"experiment_id": path_id()},
    tags=["experiments"],
)
def stop_experiment(experiment_id: str) -> Response:
    return _transition(experiment_id, "stop")


@blueprint.post("/experiments/<experiment_id>/ship")
@require_key(write=True)
@operation(
    summary="Ship a variant: publish it as the paywall's default and stop the experiment",
    description=PREVIEW
    + "Publishes a new version of the paywall with the variant first (everyone's when no experiment takes "
    "them), stops the experiment, and audits it with the results at that moment. 409 unless running.",
    body=ExperimentShipBody,
    responses={200: ExperimentEnvelope},
    errors=(409,),
    path_params={"experiment_id": path_id()},
    tags=["experiments"],
)
def ship_experiment(experiment_id: str, body: ExperimentShipBody) -> Response:
    who = principal()
    try:
        with state().db.write() as conn:
            results = experiment_store.stored(conn, [experiment_id]).get(experiment_id)
            shipped, _ = repo.ship(
                conn, who.workspace_id, experiment_id, body.variant_id, actor=who.key_id,
                evidence=results.results if results else {},
            )  # fmt: skip
    except DefinitionProblem as exc:
        raise _refused(exc) from None
    return respond(ExperimentEnvelope.model_validate({"experiment": _body(shipped, results)}))
