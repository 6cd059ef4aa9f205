"""Rollback rules: the machine-checkable form of an action's `rollback_conditions`.

The spec shows an action's rollback conditions as sentences; the monitor has to check them after
every refresh, so they are stored as rules (design note §4: metric, scope, comparator,
threshold, window, minimum sample: the shape Meta's rule filters, Adapty's automations and
Argo's analysis templates share) and the sentences are rendered from the rules, never written by
hand. A rule that renders is a rule the monitor can check: `from_dict` refuses anything else with
a message naming the field.

Evaluation against data is the monitor's (docs/actions-engine.md, `orchestration/actions/`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, get_args

Metric = Literal[
    "cpi",
    "trial_rate",
    "trial_to_paid",
    "roas_d7",
    "refund_rate",
    "daily_spend",
    "installs_per_day",
    "arpu_d14",
    "srm",
]
METRICS: tuple[str, ...] = get_args(Metric)
Comparator = Literal["gt", "lt"]
COMPARATORS: tuple[str, ...] = get_args(Comparator)
ThresholdKind = Literal["relative_to_baseline", "absolute"]
THRESHOLD_KINDS: tuple[str, ...] = get_args(ThresholdKind)
Entity = Literal["campaign", "creative", "paywall"]
ENTITIES: tuple[str, ...] = get_args(Entity)
SampleUnit = Literal["installs", "trials", "matured_trials", "purchases", "users", "days"]
SAMPLE_UNITS: tuple[str, ...] = get_args(SampleUnit)
Test = Literal["confidence_sequence", "consecutive"]
TESTS: tuple[str, ...] = get_args(Test)
OnBreach = Literal["rollback", "alert"]
ON_BREACH: tuple[str, ...] = get_args(OnBreach)

# Metrics whose values are fractions (rendered as percentages) and money per unit (rendered with
# the threshold's currency); ROAS is a ratio and installs a count.
RATE_METRICS = frozenset({"trial_rate", "trial_to_paid", "refund_rate"})
MONEY_METRICS = frozenset({"cpi", "daily_spend", "arpu_d14"})
NAME_MAX = 200


class RuleProblem(ValueError):
    """A rollback rule that cannot be checked as stated; the message names the field."""


@dataclass(frozen=True)
class RollbackRule:
    id: str
    metric: Metric
    scope_entity: Entity
    scope_name: str
    comparator: Comparator
    threshold_kind: ThresholdKind
    threshold_value: float
    # The pre-change window the threshold is relative to (None for absolute thresholds).
    baseline_window_days: int | None
    # How long after the change the rule is checked.
    window_max_days: int
    min_sample_unit: SampleUnit
    min_sample_value: int
    grace_hours: int
    test: Test
    on_breach: OnBreach
    # `confidence_sequence`: the two-sided alpha and the fixed N* of the anytime-valid bound (§2.6).
    alpha: float | None = None
    n_star: int | None = None
    # `consecutive`: how many consecutive breaching checks fire the rule.
    consecutive: int = 1
    # The currency of an absolute money threshold (ISO 4217), else None.
    currency: str | None = None

    def __post_init__(self) -> None:
        _validate(self)

    def to_dict(self) -> dict[str, Any]:
        """The stored JSON shape (design note §4)."""
        threshold: dict[str, Any] = {"kind": self.threshold_kind, "value": self.threshold_value}
        if self.currency is not None:
            threshold["currency"] = self.currency
        return {
            "id": self.id,
            "metric": self.metric,
            "scope": {"entity": self.scope_entity, "name": self.scope_name},
            "comparator": self.comparator,
            "threshold": threshold,
            "baseline": None if self.baseline_window_days is None else {"window_days": self.baseline_window_days},
            "window": {"max_days": self.window_max_days},
            "min_sample": {"unit": self.min_sample_unit, "value": self.min_sample_value},
            "grace_hours": self.grace_hours,
            "test": self.test,
            "alpha": self.alpha,
            "n_star": self.n_star,
            "consecutive": self.consecutive,
            "on_breach": self.on_breach,
        }

    @classmethod
    def from_dict(cls, data: Any) -> RollbackRule:
        """A rule from its JSON shape; RuleProblem names the first field that is missing or wrong."""
        if not isinstance(data, dict):
            raise RuleProblem("rule: must be an object")
        known = {
            "id", "metric", "scope", "comparator", "threshold", "baseline", "window", "min_sample",
            "grace_hours", "test", "alpha", "n_star", "consecutive", "on_breach",
        }  # fmt: skip
        unknown = sorted(set(data) - known)
        if unknown:
            raise RuleProblem(f"{unknown[0]}: unknown field")
        scope = _object(data, "scope", ("entity", "name"))
        threshold = _object(data, "threshold", ("kind", "value", "currency"))
        baseline = data.get("baseline")
        if baseline is not None:
            baseline = _object(data, "baseline", ("window_days",))
        window = _object(data, "window", ("max_days",))
        sample = _object(data, "min_sample", ("unit", "value"))
        return cls(
            id=_get(data, "id", str),
            metric=_get(data, "metric", str),  # checked in __post_init__
            scope_entity=_get(scope, "entity", str, "scope."),
            scope_name=_get(scope, "name", str, "scope."),
            comparator=_get(data, "comparator", str),
            threshold_kind=_get(threshold, "kind", str, "threshold."),
            threshold_value=_number(threshold, "value", "threshold."),
            currency=_optional(threshold, "currency", str, "threshold."),
            baseline_window_days=None if baseline is None else _get(baseline, "window_days", int, "baseline."),
            window_max_days=_get(window, "max_days", int, "window."),
            min_sample_unit=_get(sample, "unit", str, "min_sample."),
            min_sample_value=_get(sample, "value", int, "min_sample."),
            grace_hours=_get(data, "grace_hours", int),
            test=_get(data, "test", str),
            alpha=None if data.get("alpha") is None else _number(data, "alpha"),
            n_star=_optional(data, "n_star", int),
            consecutive=1 if data.get("consecutive") is None else _get(data, "consecutive", int),
            on_breach=_get(data, "on_breach", str),
        )


def _object(data: dict[str, Any], name: str, keys: tuple[str, ...]) -> dict[str, Any]:
    value = data.get(name)
    if not isinstance(value, dict):
        raise RuleProblem(f"{name}: must be an object")
    unknown = sorted(set(value) - set(keys))
    if unknown:
        raise RuleProblem(f"{name}.{unknown[0]}: unknown field")
    return value


def _get(data: dict[str, Any], name: str, kind: type, prefix: str = "") -> Any:
    if name not in data or data[name] is None:
        raise RuleProblem(f"{prefix}{name}: is required")
    value = data[name]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise RuleProblem(f"{prefix}{name}: must be {'a whole number' if kind is int else 'a string'}")
    return value


def _optional(data: dict[str, Any], name: str, kind: type, prefix: str = "") -> Any:
    return None if data.get(name) is None else _get(data, name, kind, prefix)


def _number(data: dict[str, Any], name: str, prefix: str = "") -> float:
    value = data.get(name)
    if value is None:
        raise RuleProblem(f"{prefix}{name}: is required")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise RuleProblem(f"{prefix}{name}: must be a finite number")
    return float(value)


def _one_of(name: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise RuleProblem(f"{name}: must be one of {', '.join(allowed)}, got {value!r}")


def _validate(rule: RollbackRule) -> None:
    """The first problem of the rule, in the order its fields are written (RuleProblem)."""
    _validate_subject(rule)
    _validate_threshold(rule)
    _validate_window(rule)
    _validate_test(rule)


def _validate_subject(rule: RollbackRule) -> None:
    if not rule.id or len(rule.id) > 64:
        raise RuleProblem("id: must be 1 to 64 characters")
    _one_of("metric", rule.metric, METRICS)
    _one_of("scope.entity", rule.scope_entity, ENTITIES)
    if not rule.scope_name or len(rule.scope_name) > NAME_MAX:
        raise RuleProblem(f"scope.name: must be 1 to {NAME_MAX} characters")
    _one_of("comparator", rule.comparator, COMPARATORS)
    _one_of("threshold.kind", rule.threshold_kind, THRESHOLD_KINDS)


def _validate_threshold(rule: RollbackRule) -> None:
    """The threshold's value for its kind and metric, its currency and its baseline."""
    value = rule.threshold_value
    if not math.isfinite(value):
        raise RuleProblem("threshold.value: must be a finite number")
    if rule.metric == "srm":
        # A sample-ratio mismatch is a p-value below a bar: nothing else reads as one.
        if rule.comparator != "lt" or rule.threshold_kind != "absolute" or not 0 < value < 1:
            raise RuleProblem("threshold: srm is checked as comparator lt, kind absolute, a p-value in (0, 1)")
    elif rule.threshold_kind == "relative_to_baseline":
        # A multiple of the baseline: above 1 for "rises", between 0 and 1 for "falls"; anything
        # else is a rule that fires at once or never.
        if rule.comparator == "gt" and not value > 1:
            raise RuleProblem("threshold.value: a relative gt threshold is a multiple above 1 (1.3 = +30 %)")
        if rule.comparator == "lt" and not 0 < value < 1:
            raise RuleProblem("threshold.value: a relative lt threshold is a multiple in (0, 1) (0.8 = -20 %)")
    else:
        if value < 0 or (rule.metric in RATE_METRICS and value > 1):
            bound = "a fraction in [0, 1]" if rule.metric in RATE_METRICS else "≥ 0"
            raise RuleProblem(f"threshold.value: must be {bound}")
    needs_currency = rule.threshold_kind == "absolute" and rule.metric in MONEY_METRICS
    if needs_currency and (rule.currency is None or len(rule.currency) != 3 or not rule.currency.isupper()):
        raise RuleProblem("threshold.currency: an absolute money threshold needs an ISO 4217 currency code")
    if not needs_currency and rule.currency is not None:
        raise RuleProblem("threshold.currency: only an absolute money threshold has a currency")
    if rule.threshold_kind == "relative_to_baseline":
        if rule.baseline_window_days is None or not 1 <= rule.baseline_window_days <= 365:
            raise RuleProblem("baseline.window_days: a relative threshold needs a baseline of 1 to 365 days")
    elif rule.baseline_window_days is not None:
        raise RuleProblem("baseline: only a relative threshold has a baseline")


def _validate_window(rule: RollbackRule) -> None:
    if not 1 <= rule.window_max_days <= 365:
        raise RuleProblem("window.max_days: must be between 1 and 365")
    _one_of("min_sample.unit", rule.min_sample_unit, SAMPLE_UNITS)
    if rule.min_sample_value < 1:
        raise RuleProblem("min_sample.value: must be at least 1")
    if not 0 <= rule.grace_hours <= 24 * 30:
        raise RuleProblem("grace_hours: must be between 0 and 720")


def _validate_test(rule: RollbackRule) -> None:
    _one_of("test", rule.test, TESTS)
    if rule.test == "confidence_sequence":
        if rule.alpha is None or not 0 < rule.alpha < 1:
            raise RuleProblem("alpha: a confidence_sequence rule needs alpha in (0, 1)")
        if rule.n_star is None or rule.n_star < 1:
            raise RuleProblem("n_star: a confidence_sequence rule needs n_star ≥ 1")
    elif rule.alpha is not None or rule.n_star is not None:
        raise RuleProblem("alpha: only a confidence_sequence rule has alpha and n_star")
    if not 1 <= rule.consecutive <= 100:
        raise RuleProblem("consecutive: must be between 1 and 100")
    _one_of("on_breach", rule.on_breach, ON_BREACH)


# --- Rendering: the spec's human-readable `rollback_conditions` ------------------------------

_LABELS: dict[str, str] = {
    "cpi": "CPI",
    "trial_rate": "install-to-trial rate",
    "trial_to_paid": "trial-to-paid conversion",
    "roas_d7": "day-7 ROAS",
    "refund_rate": "refund rate",
    "daily_spend": "daily spend",
    "installs_per_day": "installs per day",
    "arpu_d14": "day-14 ARPU",
}
# What each metric is measured on after the change (the cohorts the monitor reads).
_MEASURED_ON: dict[str, str] = {
    "cpi": "on installs since the change",
    "trial_rate": "on installs since the change",
    "trial_to_paid": "on trials since the change that have matured",
    "roas_d7": "on install cohorts since the change that are at least 7 days old",
    "refund_rate": "on purchases since the change",
    "daily_spend": "per day since the change",
    "installs_per_day": "per day since the change",
    "arpu_d14": "on users since the change who installed at least 14 days ago",
    "srm": "on users shown the paywall since the change",
}
_UNITS: dict[str, tuple[str, str]] = {
    "installs": ("install", "installs"),
    "trials": ("trial", "trials"),
    "matured_trials": ("matured trial", "matured trials"),
    "purchases": ("purchase", "purchases"),
    "users": ("user", "users"),
    "days": ("day of data", "days of data"),
}


def _number_text(value: float) -> str:
    """`1.5` → "1.5", `2.0` → "2", `1500` → "1,500": no trailing zeros, thousands separated."""
    rounded = round(value, 4)
    if rounded == int(rounded):
        return f"{int(rounded):,}"
    return f"{rounded:,.4f}".rstrip("0").rstrip(".")


def _percent(fraction: float) -> str:
    return f"{_number_text(round(fraction * 100, 2))}%"


def _absolute(rule: RollbackRule) -> str:
    if rule.metric in RATE_METRICS:
        return _percent(rule.threshold_value)
    if rule.metric in MONEY_METRICS:
        return f"{rule.threshold_value:,.2f} {rule.currency}"
    if rule.metric == "roas_d7":
        return f"{rule.threshold_value:.2f}"
    return _number_text(rule.threshold_value)


# Labels read as plurals take plural verbs and pronouns ("installs per day fall ... their").
_PLURAL = frozenset({"installs_per_day"})


def _change(rule: RollbackRule) -> str:
    plural = rule.metric in _PLURAL
    rises, falls, its = ("rise", "fall", "their") if plural else ("rises", "falls", "its")
    if rule.threshold_kind == "relative_to_baseline":
        baseline = f"{its} {rule.baseline_window_days}-day baseline"
        if rule.comparator == "gt":
            return f"{rises} more than {_percent(rule.threshold_value - 1)} above {baseline}"
        return f"{falls} more than {_percent(1 - rule.threshold_value)} below {baseline}"
    return f"{rises} above {_absolute(rule)}" if rule.comparator == "gt" else f"{falls} below {_absolute(rule)}"


def _conditions(rule: RollbackRule) -> str:
    singular, plural = _UNITS[rule.min_sample_unit]
    sample = f"at least {_number_text(rule.min_sample_value)} {singular if rule.min_sample_value == 1 else plural}"
    parts = [f"after {rule.grace_hours} h and {sample}" if rule.grace_hours else sample]
    if rule.consecutive > 1:
        parts.append(f"on {rule.consecutive} consecutive checks")
    return "; ".join(parts)


def render(rule: RollbackRule) -> str:
    """The rule as the spec's sentence, e.g. "Roll back if CPI of campaign meta_broad rises more
    than 30% above its 14-day baseline, measured on installs since the change (after 24 h and at
    least 150 installs)". One template per metric and comparator; tests pin each one."""
    verb = "Roll back if" if rule.on_breach == "rollback" else "Alert if"
    subject = f"{rule.scope_entity} {rule.scope_name}"
    if rule.metric == "srm":
        claim = (
            f"the traffic split of {subject} departs from the planned split "
            f"(sample-ratio mismatch, p < {_number_text(rule.threshold_value)})"
        )
    else:
        claim = f"{_LABELS[rule.metric]} of {subject} {_change(rule)}"
    return f"{verb} {claim}, measured {_MEASURED_ON[rule.metric]} ({_conditions(rule)})"


def rules_from_dicts(data: Any) -> list[RollbackRule]:
    """A stored or sent list of rules; RuleProblem names the rule's position and field."""
    if not isinstance(data, list):
        raise RuleProblem("rollback_rules: must be a list")
    rules = []
    for i, item in enumerate(data):
        try:
            rules.append(RollbackRule.from_dict(item))
        except RuleProblem as exc:
            raise RuleProblem(f"rollback_rules[{i}].{exc}") from None
    ids = [r.id for r in rules]
    if len(set(ids)) != len(ids):
        raise RuleProblem("rollback_rules: rule ids must be unique within an action")
    return rules
