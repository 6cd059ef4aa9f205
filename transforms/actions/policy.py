"""The per-workspace thresholds of the growth-actions engine, executor and monitor.

One frozen value, so every consumer reads the same numbers for one refresh. The defaults are
docs/actions-engine.md's ("Tables", `action_policies`) and the design note's §5.1: ±20 % per
budget leg and ≤ 10 % of managed daily spend (the caps of comparable tools), a 7-day cooldown
(Meta's learning week, Fluency's re-evaluation delay), a 14-day suppression after a human's
rejection, at most 5 new actions per refresh. A workspace without a stored policy uses these.

Validation is here rather than in the CLI or the store, so a policy that exists at all is a
usable one: a probability of 1 can never be reached, a 0-day observation window completes an
action before any data arrives, and a leg cap above 100 % is not a cap.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


class PolicyProblem(ValueError):
    """A policy value out of its range; the message names the field and the allowed range."""


# Upper bounds against typos (a 10-year window is already more than any action needs).
MAX_DAYS = 3650
MAX_NEW_ACTIONS = 100

DAY_FIELDS = ("target_payback_days", "cooldown_days", "suppress_after_reject_days", "observation_days")
FRACTION_FIELDS = ("max_leg_change", "max_portfolio_change")


@dataclass(frozen=True)
class Policy:
    # A campaign whose projected payback is longer than this is never a budget shift's recipient.
    target_payback_days: int = 180
    # The posterior probability a proposal (and a guardrail's `statistical_confidence`) needs.
    p_decision: float = 0.95
    # A budget leg moves at most this fraction of its campaign's daily budget.
    max_leg_change: float = 0.20
    # One action moves at most this fraction of the workspace's managed daily spend.
    max_portfolio_change: float = 0.10
    # Days after a FloKit change on an entity before another action may touch it.
    cooldown_days: int = 7
    # Days a proposal a human rejected is not proposed again.
    suppress_after_reject_days: int = 14
    # New actions the engine may open per refresh (ranked by expected impact).
    max_new_actions_per_refresh: int = 5
    # Days a running action is watched before it is `completed`.
    observation_days: int = 14
    # Whether a monitor breach of a rule with `on_breach: rollback` rolls the action back
    # (otherwise it only emits `guardrail.triggered`).
    auto_rollback: bool = True

    def __post_init__(self) -> None:
        for name in (*DAY_FIELDS, "max_new_actions_per_refresh"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise PolicyProblem(f"{name}: must be a whole number, got {value!r}")
        for name in DAY_FIELDS:
            value = getattr(self, name)
            if not 1 <= value <= MAX_DAYS:
                raise PolicyProblem(f"{name}: must be between 1 and {MAX_DAYS} days, got {value}")
        if not 1 <= self.max_new_actions_per_refresh <= MAX_NEW_ACTIONS:
            raise PolicyProblem(
                f"max_new_actions_per_refresh: must be between 1 and {MAX_NEW_ACTIONS}, "
                f"got {self.max_new_actions_per_refresh}"
            )
        for name in (*FRACTION_FIELDS, "p_decision"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or value != value:
                raise PolicyProblem(f"{name}: must be a number, got {value!r}")
        for name in FRACTION_FIELDS:
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise PolicyProblem(f"{name}: must be a fraction in (0, 1] (0.2 = 20 %), got {value}")
        # Below 0.5 the engine would act on the less likely side; 1 is never reached.
        if not 0.5 <= self.p_decision < 1:
            raise PolicyProblem(f"p_decision: must be a probability in [0.5, 1), got {self.p_decision}")
        if not isinstance(self.auto_rollback, bool):
            raise PolicyProblem(f"auto_rollback: must be true or false, got {self.auto_rollback!r}")

    def changed(self, **changes: Any) -> Policy:
        """This policy with `changes` applied and validated (PolicyProblem names the field)."""
        unknown = sorted(set(changes) - set(FIELDS))
        if unknown:
            raise PolicyProblem(f"{unknown[0]}: unknown policy field; expected one of {', '.join(FIELDS)}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Policy:
        """A policy from stored or sent values; missing fields take the defaults."""
        return DEFAULT.changed(**values)


FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Policy))
DEFAULT = Policy()
