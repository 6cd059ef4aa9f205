"""Paywall configurations: the published document, deterministic variant assignment, the answer.

A published configuration is a document of variants, each with its offers and a
`traffic_weight`. While an experiment is active a user's variant is a deterministic function of
(app, paywall, user): the same user always sees the same variant, and over many users each
variant's share follows its weight. With no experiment active everyone sees the first variant.
"""

from __future__ import annotations

import hashlib
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


def parse_document(raw: object) -> PaywallDocument:
    try:
        return PaywallDocument.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "document"
        raise InvalidDocument(f"{where}: {first['msg']}") from None


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
