"""A platform's objects as FloKit keeps them, and how they meet the reports' labels.

Every client (Meta, Apple Search Ads, the sandbox) answers with `PlatformEntity` values: the
object's type, id, parent, name, status (`active`, `paused`, or the platform's other states
lower-cased: `archived`, `deleted`, …), daily budget in ISO minor units (None where the object has
no budget of its own: Meta ads, Apple ad groups) and the platform's last edit time.

Mapping to the reports (`report_campaign`, `report_creative`). The issue asks for the network ids
the attribution provider reports, else the name. What FloKit's canonical install events carry
(transforms/ingest/attribution.py `ATTRIBUTION_LEVELS`, attribution_provider_b.py
`ATTRIBUTION_FIELDS`; the subscription providers' `attribution_campaign`) is names only:
`network`, `campaign`, `adgroup`, `creative`, from Adjust's `{campaign_name}`… placeholders and
tracker name, and AppsFlyer's `campaign`, `af_adset`, `af_ad`. No install property holds a
platform's campaign, ad set or ad id, and the spend syncs group by the same names. So the mapping
is by name equality with the labels the reports show: a campaign whose name is a report campaign;
an ad (Meta) or ad group (Apple) whose name is a report creative of its campaign's label. An
object whose name matches nothing stays unmapped (None): the engine cannot act on what it cannot
see in the reports, and guessing a near match would act on the wrong campaign.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime

# The entity types whose name may be a creative label: Meta's ad (Adjust's `creative_name` and
# AppsFlyer's `af_ad` are the ad's name), and Apple's ad group, the finest level Apple lets a
# client pause; Adjust reports Apple's keyword at the creative level, so an Apple ad group maps
# only where the workspace's creative labels are ad group names.
CREATIVE_LEVELS = frozenset({"ad", "ad_group"})


@dataclass(frozen=True)
class AccountInfo:
    """The platform's own view of the account: its id, name and currency."""

    external_account_id: str
    name: str
    currency: str


@dataclass(frozen=True)
class PlatformEntity:
    entity_type: str
    external_id: str
    parent_external_id: str | None
    name: str
    status: str
    daily_budget: int | None
    currency: str | None
    edited_at: datetime | None
    report_campaign: str | None = None
    report_creative: str | None = None


def map_labels(
    entities: Iterable[PlatformEntity], pairs: Iterable[tuple[str, str]], campaigns: Iterable[str] = ()
) -> list[PlatformEntity]:
    """The entities with `report_campaign` / `report_creative` set by name equality.

    `pairs` are the (campaign, creative) labels the reports show; `campaigns` any further campaign
    labels (a campaign with installs but no creative label). An ad set's and an ad's campaign label
    is its campaign's, found through the parent chain."""
    pairs = set(pairs)
    campaign_labels = {c for c, _ in pairs} | set(campaigns)
    items = list(entities)
    parents = {e.external_id: e for e in items}

    def campaign_of(entity: PlatformEntity) -> PlatformEntity | None:
        seen = 0
        current: PlatformEntity | None = entity
        while current is not None and current.entity_type != "campaign" and seen < 4:
            current = parents.get(current.parent_external_id or "")
            seen += 1
        return current if current is not None and current.entity_type == "campaign" else None

    out = []
    for entity in items:
        campaign = campaign_of(entity)
        label = campaign.name if campaign is not None and campaign.name in campaign_labels else None
        creative = None
        if entity.entity_type in CREATIVE_LEVELS and label is not None and (label, entity.name) in pairs:
            creative = entity.name
        out.append(replace(entity, report_campaign=label, report_creative=creative))
    return out
