"""The `data` of every webhook event type, declared once: the real producers and the samples of
POST /v1/webhooks/test are built by the same functions, so a receiver written against a sample
parses the real event (the samples used to drift: `integration.error` and `action.created`
sent keys the real events never had).

Each type's payload is a TypedDict (`PAYLOAD_TYPES`): the contract a receiver can rely on, and
what the parity test checks both the samples and the real events against, key by key and JSON
type by JSON type. A key annotated `X | None` is null in some real events of that type (an
`integration.error` caused by a refused connection has no status code).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from datetime import date, datetime
from typing import Any, TypedDict, Union

from transforms.timefmt import iso_z


class ExpectedImpact(TypedDict):
    metric: str
    direction: str
    magnitude: float


class ActionSummary(TypedDict):
    """An action as the action events carry it (the list form of GET /v1/actions)."""

    id: str
    type: str
    status: str
    title: str
    rationale: str
    expected_impact: ExpectedImpact
    created_at: str
    approved_at: str | None
    approved_by: str | None


class ActionEventData(TypedDict):
    """`action.created`, `action.approved`, `action.rolled_back`."""

    action: ActionSummary


class RuleScope(TypedDict):
    entity: str
    name: str


class RuleThreshold(TypedDict):
    kind: str
    value: float
    currency: str | None


class RuleBaseline(TypedDict):
    window_days: int


class RuleWindow(TypedDict):
    max_days: int


class RuleMinSample(TypedDict):
    unit: str
    value: int


class RuleData(TypedDict):
    """A rollback rule as stored (`RollbackRule.to_dict()`), `threshold.currency` always present."""

    id: str
    metric: str
    scope: RuleScope
    comparator: str
    threshold: RuleThreshold
    baseline: RuleBaseline | None
    window: RuleWindow
    min_sample: RuleMinSample
    grace_hours: int
    test: str
    alpha: float | None
    n_star: int | None
    consecutive: int
    on_breach: str


class GuardrailTriggeredData(TypedDict):
    """`guardrail.triggered`: a guardrail stopped an action. From the monitor (`guardrail`
    "rollback_rule"): the rule that breached, the observed value since the change, the bound that
    crossed the threshold, the threshold and the baseline, in the metric's units. A guardrail that
    is not a rollback rule has null `rule` and numbers."""

    guardrail: str
    action: ActionSummary
    detail: str
    rule: RuleData | None
    observed: float | None
    bound: float | None
    threshold: float | None
    baseline: float | None


class PaybackUpdatedData(TypedDict):
    """`report.payback_updated`: the published payback rows of these install days changed.

    `refreshed_at` is the publish's `generated_at` (what the reports API serves from then on);
    `cohort_start_date` .. `cohort_end_date` (inclusive, YYYY-MM-DD) is the smallest range of
    cohort (install) days holding every changed row: re-read the payback report over it."""

    report: str
    refreshed_at: str
    cohort_start_date: str
    cohort_end_date: str


class IntegrationErrorData(TypedDict):
    """`integration.error`, for three reasons told apart by `reason`, in one shape (the fields of
    the other reasons are null, so a receiver parses one schema):

    - `integration_sync_failed`: an integration's provider refused its credentials or its config
      during sync `sync_id` (`error_code` `auth` or `config`; `message` is the provider's text);
      the integration is now `error`. Transient failures (rate limits, 5xx) send nothing.
    - `ad_account_sync_failed`: an ad platform refused an ad account's credentials during a
      registry sync (`ad_account_id`, `platform`; `error_code` `auth`, `message` the platform's
      text); the ad account is now `error`. An ad account is not an integration (it has no
      `integration_id` and no sync rows), hence its own keys rather than a borrowed id.
    - `webhook_endpoint_disabled`: a webhook endpoint was disabled after consecutive failed sends.
    """

    reason: str
    integration_id: str | None
    integration_type: str | None
    sync_id: str | None
    ad_account_id: str | None
    platform: str | None
    error_code: str | None
    message: str | None
    endpoint_id: str | None
    url: str | None
    consecutive_failures: int | None
    last_status_code: int | None  # null when no HTTP answer came (refused, timed out)
    last_error: str | None  # "HTTP 500", or why no answer came ("timeout: ReadTimeout")


class ExperimentSummary(TypedDict):
    """An experiment as its events carry it (issue 35, preview)."""

    id: str
    app_id: str
    paywall_id: str
    name: str
    status: str
    primary_metric: str
    started_at: str | None
    stopped_at: str | None
    shipped_variant_id: str | None


class SrmData(TypedDict):
    p_value: float
    threshold: float
    observed: dict[str, int]
    expected: dict[str, float]


class ExperimentEventData(TypedDict):
    """`experiment.started`, `experiment.stopped` (srm null) and `experiment.srm_detected`: the
    split of the exposures differs from the configured one beyond chance (sent once per experiment)."""

    experiment: ExperimentSummary
    srm: SrmData | None


PAYLOAD_TYPES: dict[str, type] = {
    "action.created": ActionEventData,
    "action.approved": ActionEventData,
    "action.rolled_back": ActionEventData,
    "guardrail.triggered": GuardrailTriggeredData,
    "report.payback_updated": PaybackUpdatedData,
    "integration.error": IntegrationErrorData,
    "experiment.started": ExperimentEventData,
    "experiment.stopped": ExperimentEventData,
    "experiment.srm_detected": ExperimentEventData,
}

PAYBACK_REPORT = "payback"
ENDPOINT_DISABLED = "webhook_endpoint_disabled"
SYNC_FAILED = "integration_sync_failed"
AD_ACCOUNT_FAILED = "ad_account_sync_failed"


def action_summary(
    *,
    id: str,
    type: str,
    status: str,
    title: str,
    rationale: str,
    expected_impact: Mapping[str, Any],
    created_at: datetime,
    approved_at: datetime | None,
    approved_by: str | None,
) -> ActionSummary:
    return {
        "id": id,
        "type": type,
        "status": status,
        "title": title,
        "rationale": rationale,
        "expected_impact": {
            "metric": str(expected_impact["metric"]),
            "direction": str(expected_impact["direction"]),
            "magnitude": float(expected_impact["magnitude"]),
        },
        "created_at": _iso(created_at),
        "approved_at": iso_z(approved_at),
        "approved_by": approved_by,
    }


def action_event(action: ActionSummary) -> ActionEventData:
    return {"action": action}


def rule_data(rule: Mapping[str, Any]) -> RuleData:
    """The payload form of a stored rule (`RollbackRule.to_dict()`): every key always present."""
    threshold = rule["threshold"]
    baseline = rule.get("baseline")
    return {
        "id": str(rule["id"]),
        "metric": str(rule["metric"]),
        "scope": {"entity": str(rule["scope"]["entity"]), "name": str(rule["scope"]["name"])},
        "comparator": str(rule["comparator"]),
        "threshold": {
            "kind": str(threshold["kind"]),
            "value": float(threshold["value"]),
            "currency": threshold.get("currency"),
        },
        "baseline": None if baseline is None else {"window_days": int(baseline["window_days"])},
        "window": {"max_days": int(rule["window"]["max_days"])},
        "min_sample": {"unit": str(rule["min_sample"]["unit"]), "value": int(rule["min_sample"]["value"])},
        "grace_hours": int(rule["grace_hours"]),
        "test": str(rule["test"]),
        "alpha": None if rule.get("alpha") is None else float(rule["alpha"]),
        "n_star": None if rule.get("n_star") is None else int(rule["n_star"]),
        "consecutive": int(rule["consecutive"]),
        "on_breach": str(rule["on_breach"]),
    }


def guardrail_triggered(
    *,
    guardrail: str,
    action: ActionSummary,
    detail: str,
    rule: Mapping[str, Any] | None = None,
    observed: float | None = None,
    bound: float | None = None,
    threshold: float | None = None,
    baseline: float | None = None,
) -> GuardrailTriggeredData:
    return {
        "guardrail": guardrail,
        "action": action,
        "detail": detail,
        "rule": None if rule is None else rule_data(rule),
        "observed": observed,
        "bound": bound,
        "threshold": threshold,
        "baseline": baseline,
    }


def payback_updated(*, refreshed_at: datetime, cohort_start: date, cohort_end: date) -> PaybackUpdatedData:
    return {
        "report": PAYBACK_REPORT,
        "refreshed_at": _iso(refreshed_at),
        "cohort_start_date": cohort_start.isoformat(),
        "cohort_end_date": cohort_end.isoformat(),
    }


def integration_error(
    *, endpoint_id: str, url: str, consecutive_failures: int, last_status_code: int | None, last_error: str | None
) -> IntegrationErrorData:
    """The endpoint-disabled reason."""
    return {
        "reason": ENDPOINT_DISABLED,
        "integration_id": None,
        "integration_type": None,
        "sync_id": None,
        "ad_account_id": None,
        "platform": None,
        "error_code": None,
        "message": None,
        "endpoint_id": endpoint_id,
        "url": url,
        "consecutive_failures": consecutive_failures,
        "last_status_code": last_status_code,
        "last_error": last_error,
    }


def integration_sync_failed(
    *, integration_id: str, integration_type: str, sync_id: str, error_code: str, message: str
) -> IntegrationErrorData:
    """The sync-refused reason."""
    return {
        "reason": SYNC_FAILED,
        "integration_id": integration_id,
        "integration_type": integration_type,
        "sync_id": sync_id,
        "ad_account_id": None,
        "platform": None,
        "error_code": error_code,
        "message": message,
        "endpoint_id": None,
        "url": None,
        "consecutive_failures": None,
        "last_status_code": None,
        "last_error": None,
    }


def ad_account_sync_failed(*, ad_account_id: str, platform: str, error_code: str, message: str) -> IntegrationErrorData:
    """The ad-account-refused reason."""
    return {
        "reason": AD_ACCOUNT_FAILED,
        "integration_id": None,
        "integration_type": None,
        "sync_id": None,
        "ad_account_id": ad_account_id,
        "platform": platform,
        "error_code": error_code,
        "message": message,
        "endpoint_id": None,
        "url": None,
        "consecutive_failures": None,
        "last_status_code": None,
        "last_error": None,
    }


def experiment_summary(
    *,
    id: str,
    app_id: str,
    paywall_id: str,
    name: str,
    status: str,
    primary_metric: str,
    started_at: datetime | None,
    stopped_at: datetime | None,
    shipped_variant_id: str | None,
) -> ExperimentSummary:
    return {
        "id": id, "app_id": app_id, "paywall_id": paywall_id, "name": name, "status": status,
        "primary_metric": primary_metric, "started_at": iso_z(started_at), "stopped_at": iso_z(stopped_at),
        "shipped_variant_id": shipped_variant_id,
    }  # fmt: skip


def experiment_event(experiment: ExperimentSummary, srm: SrmData | None = None) -> ExperimentEventData:
    return {"experiment": experiment, "srm": srm}


def _iso(value: datetime) -> str:
    text = iso_z(value)
    assert text is not None
    return text


# --- The samples POST /v1/webhooks/test sends: the real builders, ids and values obviously fake ---

_SAMPLE_TIME = datetime.fromisoformat("2026-01-01T00:00:00+00:00")
_SAMPLE_IMPACT = {"metric": "payback_days", "direction": "decrease", "magnitude": 12.0}
# The design note's example rule (docs/actions-engine.md "Tables"), as `RollbackRule.to_dict()` stores it.
_SAMPLE_RULE: dict[str, Any] = {
    "id": "rb1",
    "metric": "cpi",
    "scope": {"entity": "campaign", "name": "sample_campaign"},
    "comparator": "gt",
    "threshold": {"kind": "relative_to_baseline", "value": 1.3},
    "baseline": {"window_days": 14},
    "window": {"max_days": 14},
    "min_sample": {"unit": "installs", "value": 150},
    "grace_hours": 24,
    "test": "confidence_sequence",
    "alpha": 0.1,
    "n_star": 1500,
    "consecutive": 1,
    "on_breach": "rollback",
}


def _sample_action(status: str, *, approved: bool, action_type: str = "budget_shift") -> ActionSummary:
    return action_summary(
        id="act_sample",
        type=action_type,
        status=status,
        title="Sample action",
        rationale="Sample rationale",
        expected_impact=_SAMPLE_IMPACT,
        created_at=_SAMPLE_TIME,
        approved_at=_SAMPLE_TIME if approved else None,
        approved_by="ops@example.com" if approved else None,
    )


def _sample_experiment(status: str, shipped: str | None = None) -> ExperimentSummary:
    return experiment_summary(
        id="exp_sample", app_id="app_sample", paywall_id="onboarding", name="Sample experiment", status=status,
        primary_metric="paid_conversion_rate", started_at=_SAMPLE_TIME,
        stopped_at=_SAMPLE_TIME if status == "stopped" else None, shipped_variant_id=shipped,
    )  # fmt: skip


SAMPLE_DATA: dict[str, Mapping[str, object]] = {
    "action.created": action_event(_sample_action("ready", approved=False)),
    "action.approved": action_event(_sample_action("approved", approved=True)),
    "action.rolled_back": action_event(_sample_action("rolled_back", approved=True, action_type="creative_pause")),
    "guardrail.triggered": guardrail_triggered(
        guardrail="rollback_rule",
        action=_sample_action("running", approved=True),
        detail="Sample: Roll back if CPI of campaign sample_campaign rises more than 30% above its 14-day baseline",
        rule=_SAMPLE_RULE,
        observed=3.1,
        bound=2.8,
        threshold=2.6,
        baseline=2.0,
    ),
    "report.payback_updated": payback_updated(
        refreshed_at=_SAMPLE_TIME, cohort_start=date(2025, 12, 1), cohort_end=date(2025, 12, 31)
    ),
    "experiment.started": experiment_event(_sample_experiment("running")),
    "experiment.stopped": experiment_event(_sample_experiment("stopped", shipped="annual_first")),
    "experiment.srm_detected": experiment_event(
        _sample_experiment("running"),
        {
            "p_value": 0.00002,
            "threshold": 0.001,
            "observed": {"control": 1210, "annual_first": 1012},
            "expected": {"control": 1111.0, "annual_first": 1111.0},
        },
    ),
    "integration.error": integration_sync_failed(
        integration_id="int_sample",
        integration_type="attribution_provider_a",
        sync_id="sync_sample",
        error_code="auth",
        message="Sample: the provider answered HTTP 401",
    ),
}


# --- Shapes: what the parity test compares -----------------------------------------------------

JSON_TYPES = ("null", "boolean", "number", "string", "array", "object")


def json_type(value: object) -> str:
    """The JSON type a receiver sees (ints and floats are both numbers on the wire)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    raise TypeError(f"not a JSON value: {value!r}")


def conformance(value: object, declared: Any, path: str = "data") -> list[str]:
    """Where `value` departs from the declared type: missing or extra keys, wrong JSON types,
    recursively (an empty list when it conforms)."""
    allowed = _json_types(declared)
    got = json_type(value)
    if got not in allowed:
        return [f"{path}: {got}, declared {'|'.join(sorted(allowed))}"]
    hints = typed_dict_hints(declared)
    if hints is None or not isinstance(value, Mapping):
        return []
    problems = [f"{path}.{key}: missing" for key in hints if key not in value]
    problems += [f"{path}.{key}: not declared" for key in value if key not in hints]
    for key, hint in hints.items():
        if key in value:
            problems += conformance(value[key], hint, f"{path}.{key}")
    return problems


def _members(declared: Any) -> tuple[Any, ...]:
    if typing.get_origin(declared) in (Union, types.UnionType):
        return typing.get_args(declared)
    return (declared,)


def _json_types(declared: Any) -> set[str]:
    out = set()
    for member in _members(declared):
        origin = typing.get_origin(member) or member
        if member is type(None):
            out.add("null")
        elif origin is bool:
            out.add("boolean")
        elif origin in (int, float):
            out.add("number")
        elif origin is str:
            out.add("string")
        elif origin in (list, tuple):
            out.add("array")
        elif origin is Any:
            out.update(JSON_TYPES)
        else:  # dict, Mapping or a TypedDict
            out.add("object")
    return out


def typed_dict_hints(declared: Any) -> dict[str, Any] | None:
    """The keys and their types when `declared` is (or admits) a TypedDict, else None."""
    for member in _members(declared):
        if typing.is_typeddict(member):
            return typing.get_type_hints(member)
    return None
