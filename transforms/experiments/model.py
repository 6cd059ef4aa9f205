"""An experiment's definition and its life: what may be created and changed, and which transition
is allowed from which status (`draft → running → stopped`; a stopped experiment keeps its results).

Pure rules the API and the repository both apply, so a refusal reads the same everywhere."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal

from transforms.experiments.assignment import Weighted

Status = Literal["draft", "running", "stopped"]
Metric = Literal["trial_start_rate", "paid_conversion_rate", "revenue_per_user_d14"]
METRICS: Final[tuple[Metric, ...]] = ("trial_start_rate", "paid_conversion_rate", "revenue_per_user_d14")
MIN_VARIANTS: Final = 2
MAX_VARIANTS: Final = 10
MAX_HOLDOUT_PCT: Final = 90.0  # a holdout of everyone would be no experiment
NAME_MAX: Final = 200
MAX_WEIGHT: Final = 1_000_000.0  # weights are relative; a bound keeps their sum finite

# Which transition each action is, from which status.
TRANSITIONS: Final[dict[str, tuple[Status, Status]]] = {
    "start": ("draft", "running"),
    "stop": ("running", "stopped"),
    "ship": ("running", "stopped"),
}


class DefinitionProblem(ValueError):
    """A definition the API refuses: `field` names the body field (400 naming the field)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def check_variants(variants: Sequence[Weighted], published: Sequence[str] | None) -> None:
    """2 to 10 distinct variants with weights ≥ 0, at least one above 0, each naming a variant of
    the paywall's published configuration (`published`: its variant ids; None when it has none)."""
    if not MIN_VARIANTS <= len(variants) <= MAX_VARIANTS:
        raise DefinitionProblem("variants", f"{MIN_VARIANTS} to {MAX_VARIANTS} variants, got {len(variants)}")
    ids = [v.variant_id for v in variants]
    if len(set(ids)) != len(ids):
        raise DefinitionProblem("variants", "variant_id values must be distinct")
    for i, v in enumerate(variants):
        if not 0 <= v.weight <= MAX_WEIGHT:  # NaN fails too
            raise DefinitionProblem(f"variants.{i}.weight", f"must be a number from 0 to {MAX_WEIGHT:g}")
    if not any(v.weight > 0 for v in variants):
        raise DefinitionProblem("variants", "at least one variant needs a weight above 0")
    if published is None:
        raise DefinitionProblem("paywall_id", "the paywall has no published configuration: publish one first")
    for i, v in enumerate(variants):
        if v.variant_id not in published:
            raise DefinitionProblem(
                f"variants.{i}.variant_id",
                f"{v.variant_id!r} is not a variant of the paywall's published configuration ({', '.join(published)})",
            )


def check_weights_change(current: Sequence[Weighted], proposed: Sequence[Weighted], status: Status) -> None:
    """While running, variants may be added and weights changed but none removed: users already
    exposed to a variant keep it for the experiment's life (a weight of 0 stops new entries)."""
    if status == "running":
        missing = [v.variant_id for v in current if v.variant_id not in {p.variant_id for p in proposed}]
        if missing:
            raise DefinitionProblem(
                "variants", f"a running experiment keeps its variants ({', '.join(missing)} missing): set a weight of 0"
            )
        if proposed[0].variant_id != current[0].variant_id:
            raise DefinitionProblem("variants", f"the control ({current[0].variant_id}) stays first while running")
    if status == "stopped":
        raise DefinitionProblem("variants", "a stopped experiment's variants cannot change")


def check_holdout(holdout_pct: float) -> None:
    if not 0 <= holdout_pct <= MAX_HOLDOUT_PCT:
        raise DefinitionProblem("holdout_pct", f"a percentage from 0 to {MAX_HOLDOUT_PCT:g}")


def refused(action: str, status: Status) -> str | None:
    """Why `action` cannot be taken from `status` (None: it can)."""
    source, target = TRANSITIONS[action]
    if status != source:
        return f"cannot {action} an experiment that is {status}: {action} moves {source} → {target}"
    return None
