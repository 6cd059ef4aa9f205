"""The per-workspace action policy: the contract's defaults and validation that names the field."""

from __future__ import annotations

import math

import pytest

from transforms.actions.policy import DEFAULT, FIELDS, Policy, PolicyProblem


def test_defaults_are_the_contracts() -> None:
    """docs/actions-engine.md, `action_policies`: a workspace without a row runs on these."""
    assert DEFAULT.to_dict() == {
        "target_payback_days": 180,
        "p_decision": 0.95,
        "max_leg_change": 0.20,
        "max_portfolio_change": 0.10,
        "cooldown_days": 7,
        "suppress_after_reject_days": 14,
        "max_new_actions_per_refresh": 5,
        "observation_days": 14,
        "auto_rollback": True,
    }
    assert Policy.from_dict({}) == DEFAULT and tuple(DEFAULT.to_dict()) == FIELDS


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"max_leg_change": 0}, "max_leg_change: must be a fraction in (0, 1] (0.2 = 20 %), got 0"),
        ({"max_leg_change": 1.2}, "max_leg_change: must be a fraction in (0, 1] (0.2 = 20 %), got 1.2"),
        ({"max_portfolio_change": -0.1}, "max_portfolio_change: must be a fraction in (0, 1]"),
        ({"max_portfolio_change": math.nan}, "max_portfolio_change: must be a number, got nan"),
        ({"p_decision": 1.0}, "p_decision: must be a probability in [0.5, 1), got 1.0"),
        ({"p_decision": 0.3}, "p_decision: must be a probability in [0.5, 1), got 0.3"),
        ({"cooldown_days": 0}, "cooldown_days: must be between 1 and 3650 days, got 0"),
        ({"target_payback_days": 5000}, "target_payback_days: must be between 1 and 3650 days, got 5000"),
        ({"observation_days": 1.5}, "observation_days: must be a whole number, got 1.5"),
        ({"suppress_after_reject_days": True}, "suppress_after_reject_days: must be a whole number, got True"),
        ({"max_new_actions_per_refresh": 0}, "max_new_actions_per_refresh: must be between 1 and 100, got 0"),
        ({"auto_rollback": "yes"}, "auto_rollback: must be true or false, got 'yes'"),
        ({"max_spend": 1}, "max_spend: unknown policy field"),
    ],
)
def test_a_bad_value_names_the_field_and_its_range(changes: dict, message: str) -> None:
    with pytest.raises(PolicyProblem) as info:
        DEFAULT.changed(**changes)
    assert str(info.value).startswith(message)


def test_edges_that_are_allowed() -> None:
    edge = DEFAULT.changed(max_leg_change=1, p_decision=0.5, cooldown_days=1, max_new_actions_per_refresh=100)
    assert (edge.max_leg_change, edge.p_decision, edge.cooldown_days) == (1, 0.5, 1)
    assert DEFAULT.changed(auto_rollback=False).auto_rollback is False
