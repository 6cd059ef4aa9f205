"""AppsFlyer Push API messages to canonical events: the pure adapter."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from transforms.events import CanonicalEvent
from transforms.ingest.attribution import ATTRIBUTION_LEVELS, Dropped
from transforms.ingest.attribution_provider_b import app_token, mapping_key, normalize

RECEIVED = datetime(2026, 11, 21, tzinfo=UTC)
RATES = {"USD": 1.05, "GBP": 0.85}


def message(**fields: Any) -> dict[str, Any]:
    base = {
        "app_id": "com.example.app",
        "event_name": "install",
        "event_time": "2026-11-20 23:59:59.999",
        "platform": "android",
        "country_code": "de",
        "appsflyer_id": "1763630000000-7654321",
        "advertising_id": "38400000-8cf0-11bd-b23e-10b96e40000d",
        "media_source": "googleadwords_int",
        "campaign": "winter_de",
        "af_adset": "kw_fitness",
        "af_ad": "banner_3",
    }
    return {**base, **fields}


def event(fields: dict[str, Any], mapping: dict[str, str] | None = None) -> CanonicalEvent | Dropped:
    return normalize(
        fields, workspace_id="ws_1", app="com.example.app", mapping=mapping or {}, received_at=RECEIVED,
        latest_rates=RATES,
    )  # fmt: skip


def test_an_install_maps_by_default_with_the_report_names_of_its_attribution() -> None:
    e = event(message())
    assert isinstance(e, CanonicalEvent)
    assert (e.event_type, e.source, e.platform, e.country) == ("install", "attribution_provider_b", "android", "DE")
    assert e.occurred_at == datetime(2026, 11, 20, 23, 59, 59, 999000, tzinfo=UTC)
    assert e.day.isoformat() == "2026-11-20"  # the UTC day the Master API books the install's cost on
    assert {k: e.properties[k] for k in ATTRIBUTION_LEVELS} == {
        "network": "googleadwords_int",
        "campaign": "winter_de",
        "adgroup": "kw_fitness",
        "creative": "banner_3",
    }
    assert (e.adid, e.gps_adid, e.idfa, e.user_id) == (
        "1763630000000-7654321",
        "38400000-8cf0-11bd-b23e-10b96e40000d",
        None,
        None,
    )


def test_the_event_id_is_stable_per_message_and_differs_per_device() -> None:
    first, again, other = event(message()), event(message()), event(message(appsflyer_id="other-device"))
    assert isinstance(first, CanonicalEvent) and isinstance(again, CanonicalEvent) and isinstance(other, CanonicalEvent)
    assert first.event_id == again.event_id != other.event_id
    later = event(message(event_time="2026-11-20 23:59:59.998"))
    assert isinstance(later, CanonicalEvent) and later.event_id != first.event_id


def test_in_app_events_need_a_mapping_and_carry_money() -> None:
    purchase = message(event_name="af_purchase", event_revenue=9.99, event_revenue_currency="gbp")
    assert event(purchase) == Dropped("unmapped_event")
    e = event(purchase, {"af_purchase": "purchase"})
    assert isinstance(e, CanonicalEvent)
    assert (e.event_type, e.properties["revenue"], e.properties["currency"], e.properties["event_token"]) == (
        "purchase",
        9.99,
        "GBP",
        "af_purchase",
    )
    assert event({**purchase, "event_revenue": True}, {"af_purchase": "purchase"}) == Dropped("invalid_revenue")
    assert event({**purchase, "event_revenue": "NaN"}, {"af_purchase": "purchase"}) == Dropped("invalid_revenue")


def test_values_that_are_no_value() -> None:
    """Null, objects and NUL-holding text are absent, never an error."""
    e = event(message(campaign=None, af_ad={"x": 1}, customer_user_id="a\x00b", platform=7))
    assert isinstance(e, CanonicalEvent)
    assert "campaign" not in e.properties and "creative" not in e.properties
    assert e.user_id is None and e.platform is None
    assert mapping_key({"event_name": "  "}) is None and app_token({"app_id": 12}) == "12"
    assert event(message(event_time="2023-12-31 23:59:59.000")) == Dropped("out_of_range")
