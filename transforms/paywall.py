"""Paywall configurations: the published document, deterministic variant assignment, the answer.

A published configuration is a document of variants, each with its offers and a
`traffic_weight`. While an experiment is active a user's variant is a deterministic function of
(app, paywall, user): the same user always sees the same variant, and over many users each
variant's share follows its weight. With no experiment active everyone sees the first variant.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

BillingPeriod = Literal["weekly", "monthly", "quarterly", "yearly", "lifetime"]
CACHE_CONTROL = "public, max-age=60, stale-while-revalidate=300"  # spec limits: config cache
FALLBACK_VARIANT = "control"


class Offer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    product_id: str = Field(min_length=1, max_length=200, description="Store product id.")
    name: str = Field(min_length=1, max_length=200)
    price_usd_cents: int = Field(ge=0, description="Price in US cents (minor units).")
    currency: str = Field(pattern=r"^[A-Z]{3}$", description="ISO 4217.")
    billing_period: BillingPeriod
    trial_days: int = Field(0, ge=0, le=365, description="0 = no trial.")


class Variant(BaseModel):
    model_config = ConfigDict(extra="forbid")
    variant_id: str = Field(min_length=1, max_length=100)
    layout: str = Field(min_length=1, max_length=100, description="Layout hint, e.g. single_offer, standard.")
    offers: list[Offer] = Field(min_length=1)
    cta_copy: str | None = Field(None, max_length=500)
    traffic_weight: float = Field(ge=0, description="Share of traffic while an experiment is active.")


class PaywallDocument(BaseModel):
    """What an operator publishes for one paywall of one app."""

    model_config = ConfigDict(extra="forbid")
    experiment_active: bool = False
    variants: list[Variant] = Field(min_length=1, max_length=20)

    @field_validator("variants")
    @classmethod
    def _distinct_ids(cls, variants: list[Variant]) -> list[Variant]:
        ids = [v.variant_id for v in variants]
        if len(set(ids)) != len(ids):
            raise ValueError("variant_id values must be distinct")
        return variants

    @model_validator(mode="after")
    def _some_traffic(self) -> PaywallDocument:
        if self.experiment_active and not any(v.traffic_weight > 0 for v in self.variants):
            raise ValueError("an active experiment needs at least one variant with traffic_weight > 0")
        return self


class InvalidDocument(ValueError):
    """The document does not describe a publishable configuration; the message says why."""


def _problem(error: Any) -> tuple[str, str]:
    return ".".join(str(p) for p in error["loc"]) or "document", error["msg"]


def parse_document(raw: object) -> PaywallDocument:
    try:
        return PaywallDocument.model_validate(raw)
    except ValidationError as exc:
        where, message = _problem(exc.errors()[0])
        raise InvalidDocument(f"{where}: {message}") from None


def document_problems(raw: object) -> list[tuple[str, str]]:
    """Every reason `parse_document` would refuse `raw`, as (where, message), where is the
    dotted path (`variants.0.offers.1.currency`, or `document`); empty when it is publishable.
    The same model, so a form that shows these refuses exactly what the CLI refuses."""
    try:
        PaywallDocument.model_validate(raw)
    except ValidationError as exc:
        return [_problem(e) for e in exc.errors()]
    return []


def shares(document: PaywallDocument) -> dict[str, float]:
    """Each variant's share of the traffic, as the gateway splits it (`assign_variant`): its weight
    over the sum of the weights while an experiment is active, else 1 for the first variant and 0
    for the others. Weights are relative: 50/50, 1/1 and 0.3/0.3 split alike."""
    if not document.experiment_active:
        return {v.variant_id: 1.0 if i == 0 else 0.0 for i, v in enumerate(document.variants)}
    total = sum(v.traffic_weight for v in document.variants if v.traffic_weight > 0)
    return {v.variant_id: (v.traffic_weight / total if v.traffic_weight > 0 else 0.0) for v in document.variants}


def _shown(value: Any) -> str:
    """A value as the JSON document spells it (true, null), since that is what the operator edits."""
    return json.dumps(value) if value is None or isinstance(value, bool) else str(value)


def _offer_changes(where: str, old: list[Offer], new: list[Offer]) -> list[str]:
    before = {o.product_id: o for o in old}
    after = {o.product_id: o for o in new}
    out = [f"{where}: offer {pid} removed" for pid in before if pid not in after]
    for pid, offer in after.items():
        if pid not in before:
            terms = f"{offer.name}, {offer.price_usd_cents} US cents {offer.billing_period}"
            out.append(f"{where}: offer {pid} added ({terms})")
            continue
        for name in Offer.model_fields:
            was, now = getattr(before[pid], name), getattr(offer, name)
            if was != now:
                out.append(f"{where}: offer {pid} {name} {_shown(was)} → {_shown(now)}")
    if [o.product_id for o in old if o.product_id in after] != [o.product_id for o in new if o.product_id in before]:
        out.append(f"{where}: offers reordered")
    return out


def changes(live: PaywallDocument | None, proposed: PaywallDocument) -> list[str]:
    """What publishing `proposed` changes against the live document, one line per change, in the
    words an operator checks before publishing: the experiment switch, variants added or removed,
    each variant's fields and offers, each variant's traffic share as the gateway computes it, and
    which variant everyone sees when no experiment runs. Empty when nothing changes."""
    if live is None:
        return ["first version: the gateway serves it instead of the fallback (version 0, no offers)"]
    out = []
    if live.experiment_active != proposed.experiment_active:
        out.append(f"experiment_active {_shown(live.experiment_active)} → {_shown(proposed.experiment_active)}")
    before = {v.variant_id: v for v in live.variants}
    after = {v.variant_id: v for v in proposed.variants}
    out += [f"variant {vid} removed" for vid in before if vid not in after]
    for vid, variant in after.items():
        if vid not in before:
            out.append(f"variant {vid} added ({variant.layout}, {len(variant.offers)} offer(s))")
            continue
        for name in ("layout", "cta_copy", "traffic_weight"):
            was, now = getattr(before[vid], name), getattr(variant, name)
            if was != now:
                out.append(f"variant {vid}: {name} {_shown(was)} → {_shown(now)}")
        out += _offer_changes(f"variant {vid}", before[vid].offers, variant.offers)
    was_share, now_share = shares(live), shares(proposed)
    for vid in after:
        old, new = was_share.get(vid, 0.0), now_share[vid]
        if round(old, 4) != round(new, 4):
            out.append(f"variant {vid}: share of traffic {old:.1%} → {new:.1%}")
    if live.variants[0].variant_id != proposed.variants[0].variant_id:
        out.append(
            f"first variant (everyone's when no experiment is active) {live.variants[0].variant_id} → "
            f"{proposed.variants[0].variant_id}"
        )
    return out


def bucket(app_id: str, paywall_id: str, identity: str) -> float:
    """A point in [0, 1) fixed by (app, paywall, user): SHA-256, so that it is uniform and the
    same on every server and release (Python's own hash is salted per process)."""
    digest = hashlib.sha256(f"{app_id}\x1f{paywall_id}\x1f{identity}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def assign_variant(document: PaywallDocument, *, app_id: str, paywall_id: str, identity: str) -> Variant:
    """The user's variant: the first one without an active experiment, else the variant whose
    slice of the cumulative weights holds the user's bucket (a weight of 0 gets no one)."""
    if not document.experiment_active:
        return document.variants[0]
    weighted = [v for v in document.variants if v.traffic_weight > 0]
    point = bucket(app_id, paywall_id, identity) * sum(v.traffic_weight for v in weighted)
    for variant in weighted:
        point -= variant.traffic_weight
        if point < 0:
            return variant
    return weighted[-1]  # float rounding at the very top of the range


def served(paywall_id: str, version: int, variant: Variant) -> dict[str, Any]:
    """The spec's Paywall configuration for a published version."""
    return {
        "paywall_id": paywall_id,
        "version": version,
        "variant": variant.model_dump(exclude_none=True),
        "fallbackUsed": False,
    }


def fallback(paywall_id: str) -> dict[str, Any]:
    """No published configuration: version 0, variant `control`, no offers (so the app must not
    show the paywall)."""
    return {
        "paywall_id": paywall_id,
        "version": 0,
        "variant": {"variant_id": FALLBACK_VARIANT, "layout": "standard", "offers": [], "traffic_weight": 0},
        "fallbackUsed": True,
    }
