"""Growth actions: list, read, approve, reject, roll back, create (spec "v1 REST API", "Action")."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from flask import Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from api.auth import principal, require_key
from api.context import state
from api.errors import ApiError
from api.openapi import operation
from api.responses import respond
from api.v1 import blueprint
from api.validators import Id, path_id
from transforms import actions as rules
from transforms.actions import creation
from transforms.actions.rules import NAME_MAX
from transforms.timefmt import iso_z
from warehouse.actions import executions
from warehouse.actions import repository as repo
from warehouse.actions.creation import create_evaluated, evaluate_subject
from warehouse.actions.timeline import timeline
from warehouse.db import utcnow

# Free-text limits: long enough for an email or a paragraph, short enough to keep rows small.
ACTOR_MAX = 200
NOTE_MAX = 2000
# An over-long or malformed action id answers 404, as an unknown one (api/validators.py).
ACTION_ID = path_id()

Timestamp = Annotated[str, Field(json_schema_extra={"format": "date-time"})]
StatusName = rules.Status
TypeName = rules.ActionType
Actor = Annotated[str, Field(min_length=1, max_length=ACTOR_MAX)]
Note = Annotated[str, Field(max_length=NOTE_MAX)]


class _Body(BaseModel):
    # JSON bodies are typed as sent: a number is not a string. Unknown fields are ignored so
    # that clients of this provisional API keep working when fields are added.
    model_config = ConfigDict(strict=True)


class ListQuery(BaseModel):
    status: StatusName | None = Field(None, description="Only actions in this status; omitted = all.")
    limit: int = Field(20, ge=1, le=100, description="Page size (default 20, max 100).")
    offset: int = Field(0, ge=0, le=1_000_000, description="Actions to skip (default 0).")


class ApproveBody(_Body):
    approved_by: Actor = Field(description="Who approves: an email or an identifier.")
    note: Note | None = None


class RejectBody(_Body):
    rejected_by: Actor = Field(description="Who rejects: an email or an identifier.")
    reason: Note | None = None


class CreateBody(_Body):
    workspace_id: Id = Field(description="Must be the workspace of the API key.")
    type: Literal[rules.ACCEPTED_TYPE_NAMES] = Field(  # type: ignore[valid-type]
        description="An action type or its verb alias (shift_budget, pause_creative, prepare_offer_test)."
    )
    reason: Note | None = Field(None, description="Human-readable explanation; becomes the rationale.")
    parameters: dict[str, Any] | None = Field(
        None,
        description=(
            "The typed subject, by type (BudgetShiftParameters, CreativePauseParameters, OfferTestParameters; "
            "names as the reports show them). The engine's guardrails run on it against the workspace's "
            "data: `ready_for_approval` when every check passes, `draft` otherwise. Without parameters the "
            "action is the client's own proposal: FloKit evaluates nothing for it."
        ),
    )


class ExpectedImpact(BaseModel):
    metric: str
    direction: str
    magnitude: float


class DataSignal(BaseModel):
    label: str
    value: str


class GuardrailCheck(BaseModel):
    check: str
    passed: bool
    detail: str


class TransitionEntry(BaseModel):
    entry: Literal["transition"] = Field(description="A status change.")
    from_status: StatusName | None
    to_status: StatusName
    trigger: str
    actor: str
    note: str | None
    at: Timestamp


class EvaluationEntry(BaseModel):
    entry: Literal["evaluation"] = Field(
        description="A decision that changed no status: a proposal, re-evaluation, preflight or monitor check."
    )
    kind: rules.EvaluationKind
    outcome: rules.EvaluationOutcome
    summary: str = Field(description="One human-readable line: what was evaluated and what it found.")
    engine_version: str | None = Field(description="The code version that decided.")
    data_as_of: Timestamp | None = Field(description="How fresh the data it read was.")
    detail: dict[str, Any] = Field(description="The statistics, guardrail results or rule behind the outcome.")
    at: Timestamp


class ExecutionEntry(BaseModel):
    entry: Literal["execution"] = Field(
        description="A platform write by the executor (one leg of an apply or a revert), in its latest state."
    )
    kind: Literal["apply", "revert"]
    leg: int = Field(description="1, 2, ...: decreases first.")
    platform: str = Field(description="meta, apple_search_ads, sandbox, or flokit (the paywall gateway).")
    object_type: str
    object_id: str
    field: str = Field(description="daily_budget (ISO minor units), status, or paywall_config.")
    before: Any = Field(description="The value before (absolute).")
    after: Any = Field(description="The value set (absolute).")
    state: Literal["intent", "sent", "verified", "failed", "conflict", "compensated"]
    attempts: int
    last_response_code: int | None
    last_response: str | None
    at: Timestamp


HistoryEntry = Annotated[TransitionEntry | EvaluationEntry | ExecutionEntry, Field(discriminator="entry")]


# A report label (campaign, creative, offer, paywall): as long as the registry's names allow.
Label = Annotated[str, Field(min_length=1, max_length=NAME_MAX)]


class BudgetShiftParameters(BaseModel):
    model_config = ConfigDict(extra="forbid", title="BudgetShiftParameters")
    from_campaign: Label = Field(description="The campaign budget moves from, as the reports name it.")
    to_campaign: Label = Field(description="The campaign budget moves to, as the reports name it.")
    amount_per_day: float = Field(gt=0, description="Daily budget moved, in `currency`.")
    currency: str = Field(pattern=r"^[A-Z]{3}$", description="ISO 4217 code.")


class CreativePauseParameters(BaseModel):
    model_config = ConfigDict(extra="forbid", title="CreativePauseParameters")
    creative: Label = Field(description="The creative to pause, as the reports name it.")
    campaign: Label = Field(description="Its campaign, as the reports name it.")


class OfferTestParameters(BaseModel):
    model_config = ConfigDict(extra="forbid", title="OfferTestParameters")
    paywall_id: Label
    country: str = Field(pattern=r"^[A-Z]{2}$", description="ISO 3166-1 alpha-2.")
    control_offer: Label
    treatment_offer: Label


PARAMETER_MODELS: dict[str, type[BaseModel]] = {
    "budget_shift": BudgetShiftParameters,
    "creative_pause": CreativePauseParameters,
    "offer_test": OfferTestParameters,
}


def _one_of(schema: dict[str, Any]) -> None:
    """The three shapes are exclusive (each forbids the others' keys), so the document says oneOf."""
    branches = schema.pop("anyOf", None)
    if branches is not None:
        schema["oneOf"] = branches


Parameters = Annotated[
    BudgetShiftParameters | CreativePauseParameters | OfferTestParameters | None,
    Field(
        description=(
            "The action's typed subject, by type: budget_shift, creative_pause or offer_test; "
            "null for a client's own proposal."
        ),
        json_schema_extra=_one_of,
    ),
]


class ActionOut(BaseModel):
    id: str
    type: TypeName
    status: StatusName
    title: str
    rationale: str
    expected_impact: ExpectedImpact
    created_at: Timestamp
    approved_at: Timestamp | None
    approved_by: str | None


class ActionDetail(ActionOut):
    data_signals: list[DataSignal]
    guardrail_checks: list[GuardrailCheck]
    rollback_conditions: list[str]
    parameters: Parameters
    history: list[HistoryEntry] = Field(
        description="Every transition and every evaluation, oldest first (the action's audit trail)."
    )


class ActionList(BaseModel):
    actions: list[ActionOut]
    total: int
    limit: int
    offset: int


class ActionEnvelope(BaseModel):
    action: ActionDetail


class ApprovedAction(BaseModel):
    id: str
    status: StatusName
    approved_at: Timestamp | None
    approved_by: str | None


class ApproveResult(BaseModel):
    status: Literal["ok"]
    action: ApprovedAction


class ActionStatus(BaseModel):
    id: str
    status: StatusName


class TransitionResult(BaseModel):
    status: Literal["ok"]
    action: ActionStatus


class Created(BaseModel):
    id: str
    status: rules.CreatedStatus


def _summary(a: repo.Action) -> dict[str, Any]:
    return {
        "id": a.id,
        "type": a.type,
        "status": a.status,
        "title": a.title,
        "rationale": a.rationale,
        "expected_impact": a.expected_impact,
        "created_at": iso_z(a.created_at),
        "approved_at": iso_z(a.approved_at),
        "approved_by": a.approved_by,
    }


@blueprint.get("/actions")
@require_key()
@operation(summary="List actions, newest first", query=ListQuery, responses={200: ActionList}, tags=["actions"])
def list_actions(query: ListQuery) -> Response:
    with state().db.read() as conn:
        page, total = repo.list_actions(
            conn, workspace_id=principal().workspace_id, status=query.status, limit=query.limit, offset=query.offset
        )
    return respond(
        ActionList.model_validate(
            {"actions": [_summary(a) for a in page], "total": total, "limit": query.limit, "offset": query.offset}
        )
    )


@blueprint.get("/actions/<action_id>")
@require_key()
@operation(
    summary="One action with its signals, guardrail checks, rollback conditions and history",
    responses={200: ActionEnvelope},
    path_params={"action_id": ACTION_ID},
    tags=["actions"],
)
def read_action(action_id: str) -> Response:
    ws = principal().workspace_id
    with state().db.read() as conn:
        action = repo.get_action(conn, workspace_id=ws, action_id=action_id)
        entries = timeline(conn, workspace_id=ws, action_id=action_id)
    detail = {
        **_summary(action),
        "data_signals": action.data_signals,
        "guardrail_checks": action.guardrail_checks,
        "rollback_conditions": action.rollback_conditions,
        "parameters": action.parameters,
        "history": [_execution_entry(e) if isinstance(e, executions.Execution) else _history_entry(e) for e in entries],
    }
    return respond(ActionEnvelope.model_validate({"action": detail}))


def _execution_entry(w: executions.Execution) -> dict[str, Any]:
    return {
        "entry": "execution",
        "kind": w.kind,
        "leg": w.leg,
        "platform": w.platform,
        "object_type": w.object_type,
        "object_id": w.object_id,
        "field": w.field,
        "before": w.before,
        "after": w.after,
        "state": w.state,
        "attempts": w.attempts,
        "last_response_code": w.last_response_code,
        "last_response": w.last_response,
        "at": iso_z(w.updated_at),
    }


def _history_entry(step: repo.HistoryEntry) -> dict[str, Any]:
    if isinstance(step, repo.EvaluationRecord):
        return {
            "entry": "evaluation",
            "kind": step.kind,
            "outcome": step.outcome,
            "summary": rules.evaluation_summary(step.kind, step.outcome, step.detail),
            "engine_version": step.engine_version,
            "data_as_of": iso_z(step.data_as_of),
            "detail": step.detail,
            "at": iso_z(step.created_at),
        }
    return {
        "entry": "transition",
        "from_status": step.from_status,
        "to_status": step.to_status,
        "trigger": step.trigger,
        "actor": step.actor,
        "note": step.note,
        "at": iso_z(step.created_at),
    }


def _transition(action_id: str, trigger: str, actor: str, note: str | None) -> repo.Action:
    """NotFound (404) and TransitionRefused (409) are answered by api/errors.py."""
    who = principal()
    with state().db.write() as conn:
        return repo.transition(
            conn,
            workspace_id=who.workspace_id,
            action_id=action_id,
            trigger=trigger,
            actor=actor,
            note=note,
            key_id=who.key_id,
        )


@blueprint.post("/actions/<action_id>/approve")
@require_key(write=True)
@operation(
    summary="Approve a ready action",
    description="ready -> approved; 409 conflict from any other status. Two simultaneous approvals: one 200, one 409.",
    body=ApproveBody,
    responses={200: ApproveResult},
    errors=(409,),
    path_params={"action_id": ACTION_ID},
    tags=["actions"],
)
def approve_action(action_id: str, body: ApproveBody) -> Response:
    action = _transition(action_id, "approve", body.approved_by, body.note)
    return respond(
        ApproveResult.model_validate(
            {
                "status": "ok",
                "action": {
                    "id": action.id,
                    "status": action.status,
                    "approved_at": iso_z(action.approved_at),
                    "approved_by": action.approved_by,
                },
            }
        )
    )


@blueprint.post("/actions/<action_id>/reject")
@require_key(write=True)
@operation(
    summary="Reject a draft or ready action",
    body=RejectBody,
    responses={200: TransitionResult},
    errors=(409,),
    path_params={"action_id": ACTION_ID},
    tags=["actions"],
)
def reject_action(action_id: str, body: RejectBody) -> Response:
    action = _transition(action_id, "reject", body.rejected_by, body.reason)
    return respond(
        TransitionResult.model_validate({"status": "ok", "action": {"id": action.id, "status": action.status}})
    )


@blueprint.post("/actions/<action_id>/rollback")
@require_key(write=True)
@operation(
    summary="Roll back a running or completed budget shift or creative pause",
    description="Offer tests cannot be rolled back (409). Platform changes may take a short while to revert.",
    responses={200: TransitionResult},
    errors=(409,),
    path_params={"action_id": ACTION_ID},
    tags=["actions"],
)
def rollback_action(action_id: str) -> Response:
    action = _transition(action_id, "rollback", principal().key_id, None)
    return respond(
        TransitionResult.model_validate({"status": "ok", "action": {"id": action.id, "status": action.status}})
    )


@blueprint.post("/actions")
@require_key(write=True)
@operation(
    summary="Create an action for approval",
    description=(
        "Answers 201 {id, status: ready_for_approval}; the action is listed with status ready. The action is "
        "the client's own proposal: its rationale is the reason, and FloKit evaluates nothing for it (no data "
        "signals, guardrail checks or rollback conditions; expected_impact says not_estimated)."
    ),
    body=CreateBody,
    responses={201: Created},
    errors=(404,),
    tags=["actions"],
)
def create_action(body: CreateBody) -> Response:
    who = principal()
    if body.workspace_id != who.workspace_id:
        # 404, not 403: a key never learns whether another workspace exists.
        raise ApiError(404, f"No workspace {body.workspace_id} for this API key")
    action_type = rules.canonical_type(body.type)
    if body.parameters is not None:
        return _create_with_parameters(body, action_type)
    content = rules.client_content(action_type, proposed_by=f"API key {who.key_id}", reason=body.reason)
    with state().db.write() as conn:
        action = repo.create_action(
            conn,
            workspace_id=who.workspace_id,
            action_type=action_type,
            content=content,
            actor=who.key_id,
            origin="api",
            reason=body.reason,
            key_id=who.key_id,
        )
    return _created(action)


def _parameters(action_type: str, raw: dict[str, Any]) -> dict[str, Any]:
    """The parameters checked against the type's shape; 400 naming the first wrong field."""
    try:
        model = PARAMETER_MODELS[action_type].model_validate(raw, strict=True)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"]) or "parameters"
        raise ApiError(400, f"parameters.{where}: {error['msg']}") from None
    values = model.model_dump()
    if action_type == "budget_shift":
        values["amount_per_day"] = float(values["amount_per_day"])
    return values


def _create_with_parameters(body: CreateBody, action_type: rules.ActionType) -> Response:
    """A client's subject, evaluated by the engine's own function for its type on the workspace's
    data; what it becomes is `transforms.actions.creation`'s, the writes `warehouse.actions.creation`'s."""
    who, app, now = principal(), state(), utcnow()
    assert body.parameters is not None
    parameters = _parameters(action_type, body.parameters)
    with app.db.write() as conn:
        evaluation, data_as_of = evaluate_subject(conn, app.settings.paths.lake(), who.workspace_id, action_type,
                                                  parameters, now)  # fmt: skip
        refusal = creation.currency_refusal(evaluation, action_type, parameters)
        if refusal is not None:
            raise ApiError(400, refusal)
        made = creation.creation(evaluation, action_type, proposed_by=f"API key {who.key_id}", reason=body.reason)
        action = create_evaluated(
            conn, workspace_id=who.workspace_id, action_type=action_type, parameters=parameters, made=made,
            actor=who.key_id, reason=body.reason, key_id=who.key_id, data_as_of=data_as_of, at=now,
        )  # fmt: skip
    return _created(action)


def _created(action: repo.Action) -> Response:
    """201 with the new action's id and its status as the API names it, and its location."""
    label = rules.CREATED_STATUS_LABEL if action.status == "ready" else action.status
    return respond(Created(id=action.id, status=label), 201, headers={"Location": f"/v1/actions/{action.id}"})
