"""Which variant a user gets when first exposed to an experiment.

Two independent draws from SHA-256 of (the experiment's salt, a purpose, the user): the first
decides the holdout, the second the variant over the cumulative weights. Independent purposes keep a
holdout change from moving the users who were in a variant, and the experiment's own random salt
makes consecutive experiments on one paywall bucket users independently (the old per-paywall hash
put the users of "b" in "b" again). SHA-256 rather than FNV: GrowthBook's v1 FNV hash correlates
across similar seeds (design/experiments.md §0.5).

The draw decides only a user's *first* exposure: the exposure row kept by the gateway wins for the
experiment's life, so changing weights or adding a variant moves no exposed user.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

HOLDOUT: Final = "holdout"  # the variant id an exposure in the holdout is recorded under
_SEPARATOR: Final = b"\x1f"


@dataclass(frozen=True)
class Weighted:
    variant_id: str
    weight: float


def draw(salt: bytes, purpose: str, identity: str) -> float:
    """A point in [0, 1), uniform, fixed by (salt, purpose, identity) on every host and release."""
    digest = hashlib.sha256(salt + _SEPARATOR + purpose.encode() + _SEPARATOR + identity.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def pick(variants: Sequence[Weighted], point: float) -> str:
    """The variant whose slice of the cumulative weights holds `point` (in [0, 1)); a weight of 0
    gets no one. Weights are relative: 50/50 and 1/1 split alike."""
    weighted = [v for v in variants if v.weight > 0]
    if not weighted:
        raise ValueError("no variant has a weight above 0")
    left = point * sum(v.weight for v in weighted)
    for variant in weighted:
        left -= variant.weight
        if left < 0:
            return variant.variant_id
    return weighted[-1].variant_id  # float rounding at the very top of the range


def first_assignment(salt: bytes, variants: Sequence[Weighted], holdout_pct: float, identity: str) -> str:
    """The variant id a user is first exposed to (`HOLDOUT` for the holdout, which is served the
    paywall's default configuration). `holdout_pct` is a percentage, 0 to 100."""
    if draw(salt, "holdout", identity) * 100 < holdout_pct:
        return HOLDOUT
    return pick(variants, draw(salt, "variant", identity))


def expected_shares(variants: Sequence[Weighted], holdout_pct: float) -> dict[str, float]:
    """Each cell's expected share of new exposures under these weights (holdout included when
    above 0): what the sample-ratio check compares against, epoch by epoch."""
    total = sum(v.weight for v in variants if v.weight > 0)
    inside = 1 - holdout_pct / 100
    shares = {v.variant_id: (inside * v.weight / total if v.weight > 0 and total > 0 else 0.0) for v in variants}
    if holdout_pct > 0:
        shares[HOLDOUT] = holdout_pct / 100
    return shares
