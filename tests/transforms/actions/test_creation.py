"""`POST /v1/actions` with parameters, decided: a subject the data cannot speak about is a draft
that says so, and a budget shift in another currency than the campaigns' is refused."""

from __future__ import annotations

from transforms.actions import NOT_ESTIMATED, ActionContent
from transforms.actions.creation import creation, currency_refusal
from transforms.actions.evidence import Evaluation


def test_a_subject_without_data_is_a_draft_whose_one_check_says_why() -> None:
    made = creation(None, "budget_shift", proposed_by="API key k_1", reason=None)
    assert made.content.title == "Budget shift proposed by API key k_1"
    assert made.content.rationale == "Budget shift proposed by API key k_1."
    assert [c["check"] for c in made.content.guardrail_checks] == ["minimum_cohort_size"]
    assert (made.outcome, made.fingerprint, made.rollback_rules) == ("failed", None, ())
    assert made.detail == {"summary": "Evaluation at creation: no data for this subject"}
    assert creation(None, "budget_shift", proposed_by="x", reason="why").content.rationale == "why"


def test_a_shift_in_another_currency_than_the_budgets_is_refused() -> None:
    content = ActionContent(title="t", rationale="r", expected_impact=dict(NOT_ESTIMATED), guardrail_checks=[])
    evaluation = Evaluation("budget_shift", {"currency": "EUR"}, "fp", frozenset(), content, (), {}, True, 0.99, 1, 1.0)
    assert currency_refusal(evaluation, "budget_shift", {"currency": "EUR"}) is None
    assert currency_refusal(evaluation, "budget_shift", {"currency": "USD"}) == (
        "parameters.currency: the campaigns' budgets are in EUR, not USD"
    )
    assert currency_refusal(None, "budget_shift", {"currency": "USD"}) is None
    assert currency_refusal(evaluation, "creative_pause", {"currency": "USD"}) is None
