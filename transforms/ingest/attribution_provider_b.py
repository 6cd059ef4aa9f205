"""`attribution_provider_b` (AppsFlyer): Push API messages normalized into canonical events.

AppsFlyer's Push API POSTs one JSON object per attributed event (support article 207034356,
Push API V2.0): installs (`event_name` "install"), in-app events (`event_name` the app's own
name, e.g. `af_purchase`, `af_subscribe`), re-engagements and re-attributions. Blank or null
fields are not sent. Timestamps are UTC, `yyyy-mm-dd hh:mm:ss.sss` ("2019-09-17 00:09:00.123").
The fields read here and their names in the raw data field dictionary (article 208387843):

- `event_name` -> the canonical type through the workspace mapping, as vendor A's event token
  (`flokit admin ingest map --vendor attribution_provider_b --token af_purchase --event-type
  purchase`). `install` maps to `install` without a mapping entry: AppsFlyer names every install
  so, and the reports need installs; a mapping entry for `install` still wins.
- `event_time` -> `occurred_at`; missing or invalid: dropped, as vendor A's `created_at`.
- `platform` (ios / android), `country_code` (ISO 3166-1; anything else: dropped).
- `event_revenue` + `event_revenue_currency` -> `revenue` + `currency`, with vendor A's money
  checks (`transforms.ingest.validation`).
- `media_source`, `campaign`, `af_adset`, `af_ad` -> `network`, `campaign`, `adgroup`,
  `creative`: vendor A's property names (`ATTRIBUTION_LEVELS`), so the reports group these
  installs by campaign and creative, and the Master API's `c` / `af_ad` spend rows
  (`transforms.integrations.attribution_provider_b`) meet them on the same strings.
  AppsFlyer reports organic installs with `media_source` "organic" and no campaign: organic here too.
- `customer_user_id` -> `user_id`; `appsflyer_id` (AppsFlyer's device id) -> `adid`, the
  attribution vendor's device id column; `idfa`; `advertising_id` (GAID) -> `gps_adid`.

Push API messages carry no id of their own, so the event id is derived as for vendor A's callbacks
without one: vendor, app, the device and user ids, type, time and the event name, so a redelivery
of the same message is a `duplicate`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from transforms.event_types import CANONICAL_EVENT_TYPES, INSTALL
from transforms.events import CanonicalEvent, DerivedId, canonical_event
from transforms.ingest.attribution import (
    ATTRIBUTION_PROVIDER_B,
    MAX_IDENTIFIER,
    Dropped,
    check_fields,
    platform,
)

VENDOR = ATTRIBUTION_PROVIDER_B.vendor
# AppsFlyer's own name for an install: counted as an install unless the workspace maps it otherwise.
DEFAULT_MAPPING: Mapping[str, str] = {"install": INSTALL}
# Push API field -> the property name vendor A's callbacks use for the same attribution level.
ATTRIBUTION_FIELDS: Mapping[str, str] = {
    "media_source": "network",
    "campaign": "campaign",
    "af_adset": "adgroup",
    "af_ad": "creative",
}
_IDENTITY = {"customer_user_id": "user_id", "appsflyer_id": "adid", "idfa": "idfa", "advertising_id": "gps_adid"}


def _value(fields: Mapping[str, Any], name: str) -> str | None:
    """A field as text: strings and numbers; null, booleans, objects and NUL-holding text are no value."""
    raw = fields.get(name)
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        return None
    text = str(raw).strip()
    return text if text and "\x00" not in text else None


def _identifier(fields: Mapping[str, Any], name: str) -> str | None:
    text = _value(fields, name)
    return text if text is not None and len(text) <= MAX_IDENTIFIER else None


def mapping_key(fields: Mapping[str, Any]) -> str | None:
    """What the workspace mapping is looked up by: the event name."""
    return _value(fields, "event_name")


def app_token(fields: Mapping[str, Any]) -> str | None:
    """The message's app (`app_id`, e.g. id123456789 or com.example.app): the app token when the
    Push URL names none, so a credential registered under the AppsFlyer app id needs no token in it."""
    return _identifier(fields, "app_id")


def attribution(fields: Mapping[str, Any]) -> dict[str, str]:
    found = {}
    for name, level in ATTRIBUTION_FIELDS.items():
        value = _identifier(fields, name)
        if value is not None:
            found[level] = value
    return found


def normalize(
    fields: Mapping[str, Any],
    *,
    workspace_id: str,
    app: str,
    mapping: Mapping[str, str],
    received_at: datetime,
    latest_rates: Mapping[str, float],
) -> CanonicalEvent | Dropped:
    """One Push API message to one canonical event, or the reason it is dropped (vendor A's
    reasons: `transforms.ingest.attribution.DROP_REASONS`). `app` is the verified app token."""
    key = mapping_key(fields)
    event_type = (mapping.get(key) or DEFAULT_MAPPING.get(key)) if key is not None else None
    if event_type is None or event_type not in CANONICAL_EVENT_TYPES:
        return Dropped("unmapped_event")
    raw_revenue = fields.get("event_revenue")
    checked = check_fields(
        event_type,
        time=_value(fields, "event_time"),
        country_value=_value(fields, "country_code"),
        currency=_value(fields, "event_revenue_currency"),
        revenue=None if raw_revenue == "" else raw_revenue,
        received_at=received_at,
        latest_rates=latest_rates,
    )
    if isinstance(checked, Dropped):
        return checked

    identity = {column: _identifier(fields, name) for name, column in _IDENTITY.items()}
    return canonical_event(
        # Every identity field, so two devices of one anonymous campaign never collide.
        event_id=DerivedId(app=app, user="\x1e".join(v or "" for v in identity.values()), raw=key),
        workspace_id=workspace_id,
        event_type=event_type,
        occurred_at=checked.occurred_at,
        source=VENDOR,
        received_at=received_at,
        platform=platform(_value(fields, "platform")),
        country=checked.country,
        properties={
            "revenue": checked.amount,
            "currency": checked.currency,
            "event_token": key,
            "activity_kind": _value(fields, "event_type"),
            **attribution(fields),
        },
        **identity,
    )
