"""Rollback rules: the JSON shape, validation that names the field, and one golden sentence per
metric and comparator (the spec's human-readable `rollback_conditions`)."""

from __future__ import annotations

from typing import Any

import pytest

from transforms.actions.rules import METRICS, RollbackRule, RuleProblem, render, rules_from_dicts

BASE: dict[str, Any] = {
    "id": "rb1", "scope_entity": "campaign", "scope_name": "meta_broad", "window_max_days": 14, "grace_hours": 24,
    "test": "confidence_sequence", "alpha": 0.1, "n_star": 1500, "on_breach": "rollback",
    "min_sample_unit": "installs", "min_sample_value": 150,
}  # fmt: skip
CONSECUTIVE: dict[str, Any] = {"test": "consecutive", "alpha": None, "n_star": None}
PAYWALL: dict[str, Any] = {"scope_entity": "paywall", "scope_name": "main"}
DESIGN_NOTE_EXAMPLE = (
    "Roll back if CPI of campaign meta_broad rises more than 30% above its 14-day baseline, "
    "measured on installs since the change (after 24 h and at least 150 installs)"
)


def rule(
    metric: str, comparator: str, kind: str, value: float, baseline: int | None, currency: str | None, **over: Any
) -> RollbackRule:
    values = {**BASE, "metric": metric, "comparator": comparator, "threshold_kind": kind}
    values |= {"threshold_value": value, "baseline_window_days": baseline, "currency": currency, **over}
    return RollbackRule(**values)


GOLDEN = [
    pytest.param(
        "cpi",
        "gt",
        "relative_to_baseline",
        1.3,
        14,
        None,
        {},
        "Roll back if CPI of campaign meta_broad rises more than 30% above its 14-day baseline, "
        "measured on installs since the change (after 24 h and at least 150 installs)",
        id="cpi-gt",
    ),
    pytest.param(
        "cpi",
        "lt",
        "absolute",
        1.5,
        None,
        "USD",
        {},
        "Roll back if CPI of campaign meta_broad falls below 1.50 USD, "
        "measured on installs since the change (after 24 h and at least 150 installs)",
        id="cpi-lt",
    ),
    pytest.param(
        "trial_rate",
        "lt",
        "relative_to_baseline",
        0.8,
        14,
        None,
        {},
        "Roll back if install-to-trial rate of campaign meta_broad falls more than 20% below its 14-day baseline, "
        "measured on installs since the change (after 24 h and at least 150 installs)",
        id="trial_rate-lt",
    ),
    pytest.param(
        "trial_rate",
        "gt",
        "absolute",
        0.5,
        None,
        None,
        {},
        "Roll back if install-to-trial rate of campaign meta_broad rises above 50%, "
        "measured on installs since the change (after 24 h and at least 150 installs)",
        id="trial_rate-gt",
    ),
    pytest.param(
        "trial_to_paid",
        "lt",
        "relative_to_baseline",
        0.85,
        28,
        None,
        {"min_sample_unit": "matured_trials", "min_sample_value": 100},
        "Roll back if trial-to-paid conversion of campaign meta_broad falls more than 15% below its 28-day baseline, "
        "measured on trials since the change that have matured (after 24 h and at least 100 matured trials)",
        id="trial_to_paid-lt",
    ),
    pytest.param(
        "trial_to_paid",
        "gt",
        "relative_to_baseline",
        1.25,
        28,
        None,
        {"min_sample_unit": "matured_trials", "min_sample_value": 1},
        "Roll back if trial-to-paid conversion of campaign meta_broad rises more than 25% above its 28-day baseline, "
        "measured on trials since the change that have matured (after 24 h and at least 1 matured trial)",
        id="trial_to_paid-gt",
    ),
    pytest.param(
        "roas_d7",
        "lt",
        "relative_to_baseline",
        0.8,
        14,
        None,
        {},
        "Roll back if day-7 ROAS of campaign meta_broad falls more than 20% below its 14-day baseline, "
        "measured on install cohorts since the change that are at least 7 days old "
        "(after 24 h and at least 150 installs)",
        id="roas_d7-lt",
    ),
    pytest.param(
        "roas_d7",
        "gt",
        "absolute",
        2.0,
        None,
        None,
        {},
        "Roll back if day-7 ROAS of campaign meta_broad rises above 2.00, "
        "measured on install cohorts since the change that are at least 7 days old "
        "(after 24 h and at least 150 installs)",
        id="roas_d7-gt",
    ),
    pytest.param(
        "refund_rate",
        "gt",
        "relative_to_baseline",
        1.5,
        30,
        None,
        {"min_sample_unit": "purchases", "min_sample_value": 40},
        "Roll back if refund rate of campaign meta_broad rises more than 50% above its 30-day baseline, "
        "measured on purchases since the change (after 24 h and at least 40 purchases)",
        id="refund_rate-gt",
    ),
    pytest.param(
        "refund_rate",
        "lt",
        "absolute",
        0.01,
        None,
        None,
        {"min_sample_unit": "purchases", "min_sample_value": 40},
        "Roll back if refund rate of campaign meta_broad falls below 1%, "
        "measured on purchases since the change (after 24 h and at least 40 purchases)",
        id="refund_rate-lt",
    ),
    pytest.param(
        "daily_spend",
        "gt",
        "absolute",
        1200,
        None,
        "USD",
        {
            **CONSECUTIVE,
            "consecutive": 2,
            "on_breach": "alert",
            "grace_hours": 0,
            "min_sample_unit": "days",
            "min_sample_value": 1,
        },
        "Alert if daily spend of campaign meta_broad rises above 1,200.00 USD, "
        "measured per day since the change (at least 1 day of data; on 2 consecutive checks)",
        id="daily_spend-gt",
    ),
    pytest.param(
        "daily_spend",
        "lt",
        "relative_to_baseline",
        0.5,
        7,
        None,
        {**CONSECUTIVE, "consecutive": 2, "min_sample_unit": "days", "min_sample_value": 2},
        "Roll back if daily spend of campaign meta_broad falls more than 50% below its 7-day baseline, "
        "measured per day since the change (after 24 h and at least 2 days of data; on 2 consecutive checks)",
        id="daily_spend-lt",
    ),
    pytest.param(
        "installs_per_day",
        "lt",
        "relative_to_baseline",
        0.75,
        14,
        None,
        {"grace_hours": 48, "min_sample_value": 200},
        "Roll back if installs per day of campaign meta_broad fall more than 25% below their 14-day baseline, "
        "measured per day since the change (after 48 h and at least 200 installs)",
        id="installs_per_day-lt",
    ),
    pytest.param(
        "installs_per_day",
        "gt",
        "absolute",
        5000,
        None,
        None,
        {**CONSECUTIVE, "on_breach": "alert"},
        "Alert if installs per day of campaign meta_broad rise above 5,000, "
        "measured per day since the change (after 24 h and at least 150 installs)",
        id="installs_per_day-gt",
    ),
    pytest.param(
        "arpu_d14",
        "lt",
        "relative_to_baseline",
        0.9,
        28,
        None,
        {**PAYWALL, "min_sample_unit": "users", "min_sample_value": 1500},
        "Roll back if day-14 ARPU of paywall main falls more than 10% below its 28-day baseline, "
        "measured on users since the change who installed at least 14 days ago (after 24 h and at least 1,500 users)",
        id="arpu_d14-lt",
    ),
    pytest.param(
        "arpu_d14",
        "gt",
        "absolute",
        12.5,
        None,
        "EUR",
        {**PAYWALL, "min_sample_unit": "users", "min_sample_value": 1500},
        "Roll back if day-14 ARPU of paywall main rises above 12.50 EUR, "
        "measured on users since the change who installed at least 14 days ago (after 24 h and at least 1,500 users)",
        id="arpu_d14-gt",
    ),
    pytest.param(
        "srm",
        "lt",
        "absolute",
        0.001,
        None,
        None,
        {**PAYWALL, "on_breach": "alert", "min_sample_unit": "users", "min_sample_value": 1000, "grace_hours": 6},
        "Alert if the traffic split of paywall main departs from the planned split (sample-ratio mismatch, p < 0.001), "
        "measured on users shown the paywall since the change (after 6 h and at least 1,000 users)",
        id="srm-lt",
    ),
]


@pytest.mark.parametrize(("metric", "comparator", "kind", "value", "baseline", "currency", "over", "sentence"), GOLDEN)
def test_every_template_renders_its_golden_sentence_and_round_trips(
    metric: str,
    comparator: str,
    kind: str,
    value: float,
    baseline: int | None,
    currency: str | None,
    over: dict[str, Any],
    sentence: str,
) -> None:
    r = rule(metric, comparator, kind, value, baseline, currency, **over)
    assert render(r) == sentence
    assert RollbackRule.from_dict(r.to_dict()) == r


def test_the_golden_cases_cover_every_metric_and_comparator() -> None:
    covered = {(p.values[0], p.values[1]) for p in GOLDEN}
    expected = {(m, c) for m in METRICS for c in ("gt", "lt") if m != "srm"} | {("srm", "lt")}
    assert covered == expected


def test_the_design_notes_example_renders_as_written() -> None:
    assert render(rule("cpi", "gt", "relative_to_baseline", 1.30, 14, None)) == DESIGN_NOTE_EXAMPLE


def test_the_stored_shape_is_the_design_notes() -> None:
    stored = rule("cpi", "gt", "relative_to_baseline", 1.3, 14, None).to_dict()
    assert stored == {
        "id": "rb1", "metric": "cpi", "scope": {"entity": "campaign", "name": "meta_broad"}, "comparator": "gt",
        "threshold": {"kind": "relative_to_baseline", "value": 1.3}, "baseline": {"window_days": 14},
        "window": {"max_days": 14}, "min_sample": {"unit": "installs", "value": 150}, "grace_hours": 24,
        "test": "confidence_sequence", "alpha": 0.1, "n_star": 1500, "consecutive": 1, "on_breach": "rollback",
    }  # fmt: skip
    money = rule("daily_spend", "gt", "absolute", 1200, None, "USD", **CONSECUTIVE).to_dict()
    assert money["threshold"] == {"kind": "absolute", "value": 1200.0, "currency": "USD"}
    assert money["baseline"] is None and (money["alpha"], money["n_star"]) == (None, None)


def _broken(path: str, value: Any) -> dict[str, Any]:
    data = rule("cpi", "gt", "relative_to_baseline", 1.3, 14, None).to_dict()
    *parents, last = path.split(".")
    target = data
    for key in parents:
        target = target[key]
    if value is DELETE:
        del target[last]
    else:
        target[last] = value
    return data


DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("metric", "ctr", "metric: must be one of cpi, trial_rate"),
        ("metric", DELETE, "metric: is required"),
        ("scope.entity", "ad_set", "scope.entity: must be one of campaign, creative, paywall"),
        ("scope.name", "", "scope.name: must be 1 to 200 characters"),
        ("scope.id", "x", "scope.id: unknown field"),
        ("comparator", "ge", "comparator: must be one of gt, lt"),
        ("threshold.kind", "percent", "threshold.kind: must be one of relative_to_baseline, absolute"),
        ("threshold.value", 0.7, "threshold.value: a relative gt threshold is a multiple above 1"),
        ("threshold.value", "1.3", "threshold.value: must be a finite number"),
        ("threshold.currency", "USD", "threshold.currency: only an absolute money threshold has a currency"),
        ("baseline", None, "baseline.window_days: a relative threshold needs a baseline"),
        ("window.max_days", 0, "window.max_days: must be between 1 and 365"),
        ("min_sample.unit", "clicks", "min_sample.unit: must be one of installs"),
        ("min_sample.value", 0, "min_sample.value: must be at least 1"),
        ("min_sample.value", 1.5, "min_sample.value: must be a whole number"),
        ("grace_hours", -1, "grace_hours: must be between 0 and 720"),
        ("test", "z_test", "test: must be one of confidence_sequence, consecutive"),
        ("alpha", 1.2, "alpha: a confidence_sequence rule needs alpha in (0, 1)"),
        ("n_star", None, "n_star: a confidence_sequence rule needs n_star"),
        ("consecutive", 0, "consecutive: must be between 1 and 100"),
        ("on_breach", "pause", "on_breach: must be one of rollback, alert"),
        ("severity", "high", "severity: unknown field"),
    ],
)
def test_a_rule_that_cannot_be_checked_is_refused_naming_the_field(path: str, value: Any, message: str) -> None:
    with pytest.raises(RuleProblem) as info:
        RollbackRule.from_dict(_broken(path, value))
    assert str(info.value).startswith(message)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"comparator": "lt", "value": 1.2}, "threshold.value: a relative lt threshold is a multiple in (0, 1)"),
        ({"kind": "absolute", "baseline": None}, "threshold.currency: an absolute money threshold needs an ISO 4217"),
        ({"kind": "absolute", "baseline": 14, "currency": "USD"}, "baseline: only a relative threshold has"),
        (
            {"metric": "trial_rate", "kind": "absolute", "value": 1.5, "baseline": None},
            "threshold.value: must be a fraction",
        ),
        ({"metric": "srm", "kind": "relative_to_baseline"}, "threshold: srm is checked as comparator lt"),
    ],
)
def test_combinations_that_cannot_be_checked_are_refused(kwargs: dict[str, Any], message: str) -> None:
    args = {"metric": "cpi", "comparator": "gt", "kind": "relative_to_baseline", "value": 1.3, "baseline": 14}
    args |= {"currency": None} | kwargs
    with pytest.raises(RuleProblem) as info:
        rule(args.pop("metric"), args.pop("comparator"), args.pop("kind"), args.pop("value"), args.pop("baseline"),
             args.pop("currency"))  # fmt: skip
    assert str(info.value).startswith(message)


def test_a_list_of_rules_names_the_position_and_refuses_duplicate_ids() -> None:
    good = rule("cpi", "gt", "relative_to_baseline", 1.3, 14, None).to_dict()
    assert rules_from_dicts([good]) == [RollbackRule.from_dict(good)]
    with pytest.raises(RuleProblem, match=r"^rollback_rules\[1\]\.metric: must be one of"):
        rules_from_dicts([good, {**good, "metric": "ctr"}])
    with pytest.raises(RuleProblem, match="rule ids must be unique"):
        rules_from_dicts([good, good])
    with pytest.raises(RuleProblem, match="must be a list"):
        rules_from_dicts({"id": "rb1"})
