"""What the paywall gateway serves a user while a paywall has experiments (pure rules).

- The running experiments are tried in priority order; the first whose audience holds decides.
- A user's first exposure draws a variant (`assignment.first_assignment`); a recorded exposure
  wins for the experiment's life.
- The holdout, a user matching no experiment, and a variant the live document no longer has are
  all served the paywall's default configuration: the document's first variant. A paywall that has
  experiments no longer splits by the document's `experiment_active` weights: its experiments do.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from transforms import paywall
from transforms.experiments.assignment import Weighted, first_assignment, pick


def first_variant(
    salt: bytes | None, variants: Sequence[Weighted], holdout_pct: float, *, app_id: str, paywall_id: str, identity: str
) -> str:
    """The variant of a user's first exposure. An experiment without a salt was migrated from an
    `experiment_active` document: it keeps that document's buckets of (app, paywall, user), so a
    user sees what they saw before the migration."""
    if salt is None:
        return pick(variants, paywall.bucket(app_id, paywall_id, identity))
    return first_assignment(salt, variants, holdout_pct, identity)


def settled_draw(
    salt: bytes | None,
    current: tuple[Sequence[Weighted], float],
    splits: Sequence[tuple[Sequence[Weighted], float]],
    *,
    app_id: str,
    paywall_id: str,
    identity: str,
) -> str | None:
    """The user's variant when it does not depend on which version recorded their exposure: every
    split the experiment has had (and the current one) draws the same variant for them, so a
    recorded exposure holds that variant too and none needs reading. None when the versions
    disagree: then only the recorded exposure (if any) can say."""
    draw = partial(first_variant, salt, app_id=app_id, paywall_id=paywall_id, identity=identity)
    variant = draw(*current)
    return variant if all(draw(variants, holdout) == variant for variants, holdout in splits) else None


def default_variant(document: paywall.PaywallDocument) -> paywall.Variant:
    return document.variants[0]


def served_variant(document: paywall.PaywallDocument, variant_id: str | None) -> paywall.Variant:
    """The live document's variant `variant_id`, else the default (holdout, no experiment, or a
    variant removed from the document since)."""
    for variant in document.variants:
        if variant.variant_id == variant_id:
            return variant
    return default_variant(document)
