"""The attribution adapter's mapping rules 1-5, ids and drops, as a pure function."""

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.money import LATEST
from transforms.event_types import CANONICAL_EVENT_TYPES
from transforms.events import CanonicalEvent
from transforms.ingest.attribution import (
    ADAPTERS,
    ATTRIBUTION_PROVIDER_A,
    Dropped,
    mapping_key,
    normalize,
    parse_created_at,
)

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
MAPPING = {"abc123": "trial_start", "rev456": "renewal", "ref1": "refund", "activity_kind:install": "install"}


def run(**params: str) -> CanonicalEvent | Dropped:
    base = {"app_token": "app1", "created_at": "1763700000"}
    return normalize(
        {**base, **params},
        adapter=ATTRIBUTION_PROVIDER_A,
        workspace_id="ws_1",
        mapping=MAPPING,
        received_at=NOW,
        latest_rates=LATEST,
    )


def event(**params: str) -> CanonicalEvent:
    result = run(**params)
    assert isinstance(result, CanonicalEvent), result
    return result


def test_the_adapter_declares_every_spec_parameter() -> None:
    spec = (
        "secret app_token event_token activity_kind created_at os_name country adid idfa gps_adid revenue currency"
        " user_id"
    )
    assert set(spec.split()) <= set(ADAPTERS["attribution_provider_a"].parameters)


def test_rule1_tokens_map_through_the_workspace_mapping_and_unmapped_ones_drop() -> None:
    assert event(event_token="abc123").event_type == "trial_start"
    assert run(event_token="zzz999") == Dropped("unmapped_event")
    assert run() == Dropped("unmapped_event")  # neither token nor activity kind


def test_rule1_install_callbacks_without_a_token_map_by_activity_kind() -> None:
    assert mapping_key({"activity_kind": "Install", "event_token": ""}) == "activity_kind:install"
    assert event(activity_kind="install").event_type == "install"
    assert run(activity_kind="session") == Dropped("unmapped_event")


def test_rule2_created_at_unix_seconds_or_iso_and_drops() -> None:
    assert event(activity_kind="install", created_at="1763700000").occurred_at == datetime(
        2025, 11, 21, 4, 40, tzinfo=UTC
    )
    iso = event(activity_kind="install", created_at="2026-11-20T10:00:00+02:00").occurred_at
    assert iso == datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
    assert event(activity_kind="install", created_at="2026-11-20T10:00:00Z").occurred_at.hour == 10
    assert event(activity_kind="install", created_at="2026-11-20 10:00:00").occurred_at.tzinfo is not None
    assert run(activity_kind="install", created_at="") == Dropped("missing_created_at")
    assert normalize(
        {"activity_kind": "install"},
        adapter=ATTRIBUTION_PROVIDER_A,
        workspace_id="w",
        mapping=MAPPING,
        received_at=NOW,
        latest_rates=LATEST,
    ) == Dropped("missing_created_at")
    for bad in ("yesterday", "-5", "17637000001234567", "2026-13-01"):
        assert run(activity_kind="install", created_at=bad) == Dropped("invalid_created_at"), bad


def test_events_outside_the_lake_range_are_dropped() -> None:
    assert run(activity_kind="install", created_at="2023-12-31T23:59:59Z") == Dropped("out_of_range")
    assert run(activity_kind="install", created_at="2026-11-23T12:00:01Z") == Dropped("out_of_range")
    assert isinstance(run(activity_kind="install", created_at="2024-01-01T00:00:00Z"), CanonicalEvent)


def test_rule3_platform_and_country() -> None:
    assert event(activity_kind="install", os_name="iOS", country="de").platform == "ios"
    assert event(activity_kind="install", os_name="android").platform == "android"
    assert event(activity_kind="install", os_name="windows-phone").platform is None
    assert event(activity_kind="install", country="de").country == "DE"
    # Not an ISO 3166-1 code (a name, the user-assigned ZZ): dropped like any bad field.
    assert run(activity_kind="install", country="Germany") == Dropped("unknown_country")
    assert run(activity_kind="install", country="ZZ") == Dropped("unknown_country")


def test_rule4_properties_and_rule5_identity() -> None:
    e = event(
        event_token="rev456",
        activity_kind="event",
        revenue="9.99",
        currency="eur",
        adid="ad1",
        idfa="IDFA-1",
        gps_adid="g1",
        user_id="user-7",
        secret="never-kept",
    )
    assert e.properties == {"revenue": 9.99, "currency": "EUR", "event_token": "rev456", "activity_kind": "event"}
    assert (e.adid, e.idfa, e.gps_adid, e.user_id) == ("ad1", "IDFA-1", "g1", "user-7")
    assert "never-kept" not in repr(e)
    assert run(event_token="rev456", revenue="lots") == Dropped("invalid_revenue")


def test_the_attribution_is_kept_under_the_spend_reports_names() -> None:
    """Installs carry campaign and creative as the vendor's spend report names them, so synced
    spend meets them in the reports; `tracker_name` fills what the *_name placeholders leave out."""
    named = event(activity_kind="install", network_name="Meta", campaign_name="spring_us", creative_name="video_1")
    assert {k: named.properties[k] for k in ("network", "campaign", "creative")} == {
        "network": "Meta",
        "campaign": "spring_us",
        "creative": "video_1",
    }
    assert "adgroup" not in named.properties
    tracked = event(activity_kind="install", tracker_name="Meta::spring_us::broad::video_2", creative_name="video_9")
    assert {k: tracked.properties.get(k) for k in ("network", "campaign", "adgroup", "creative")} == {
        "network": "Meta",
        "campaign": "spring_us",
        "adgroup": "broad",
        "creative": "video_9",  # its own placeholder wins over the tracker's part
    }
    organic = event(activity_kind="install", tracker_name="Organic")
    assert organic.properties.get("network") == "Organic" and "campaign" not in organic.properties


def test_ids_are_stable_per_delivery_and_distinct_per_device() -> None:
    a = event(activity_kind="install", adid="d1")
    assert event(activity_kind="install", adid="d1").event_id == a.event_id  # redelivery
    assert event(activity_kind="install", adid="d2").event_id != a.event_id
    assert event(activity_kind="install", adid="d1", created_at="1763700001").event_id != a.event_id
    with_vendor_id = event(activity_kind="install", adid="d1", event_id="vendor-42")
    assert with_vendor_id.event_id == event(activity_kind="install", adid="other", event_id="vendor-42").event_id
    assert with_vendor_id.event_id != a.event_id and with_vendor_id.event_id.startswith("evt_")


def test_canonical_types_cover_what_reports_need() -> None:
    assert {
        "install",
        "trial_start",
        "trial_converted",
        "subscription_start",
        "renewal",
        "cancellation",
        "refund",
        "purchase",
    } <= CANONICAL_EVENT_TYPES


@given(st.text(max_size=40))
def test_parse_created_at_never_raises(raw: str) -> None:
    parsed = parse_created_at(raw)
    assert parsed is None or parsed.tzinfo is not None


@given(st.dictionaries(st.sampled_from(ATTRIBUTION_PROVIDER_A.parameters), st.text(max_size=30)))
def test_normalize_is_total_and_deterministic(params: dict[str, str]) -> None:
    first = normalize(
        params, adapter=ATTRIBUTION_PROVIDER_A, workspace_id="w", mapping=MAPPING, received_at=NOW, latest_rates=LATEST
    )
    assert first == normalize(
        params, adapter=ATTRIBUTION_PROVIDER_A, workspace_id="w", mapping=MAPPING, received_at=NOW, latest_rates=LATEST
    )
    if isinstance(first, CanonicalEvent):
        assert first.event_type in CANONICAL_EVENT_TYPES and first.occurred_at.tzinfo is not None
        assert first.country is None or (len(first.country) == 2 and first.country.isupper())


@pytest.mark.parametrize(
    ("peer", "xff", "trusted", "expected"),
    [
        ("10.0.0.5", "1.2.3.4", 0, "10.0.0.5"),  # no trusted proxy: the header is ignored
        ("10.0.0.5", "1.2.3.4", 1, "1.2.3.4"),
        ("10.0.0.5", "6.6.6.6, 1.2.3.4", 1, "1.2.3.4"),  # a spoofed left entry is not trusted
        ("10.0.0.5", "6.6.6.6, 1.2.3.4, 10.0.0.9", 2, "1.2.3.4"),
        ("10.0.0.5", None, 1, "10.0.0.5"),  # no header: the peer itself
    ],
)
def test_client_address_behind_trusted_proxies(peer: str, xff: str | None, trusted: int, expected: str) -> None:
    from transforms.ingest.network import client_address

    assert client_address(peer, xff, trusted) == expected


def test_allowlist_matching() -> None:
    from transforms.ingest.network import address_allowed

    assert address_allowed("1.2.3.4", [])
    assert address_allowed("1.2.3.4", ["1.2.3.0/24"])
    assert address_allowed("::ffff:1.2.3.4", ["1.2.3.0/24"])
    assert not address_allowed("1.2.4.4", ["1.2.3.0/24", "2001:db8::/32"])
    assert address_allowed("2001:db8::1", ["2001:db8::/32"])
    assert not address_allowed("not-an-ip", ["1.2.3.0/24"])
    assert not address_allowed(None, ["1.2.3.0/24"])


def test_currencies_are_iso_4217_money_with_an_ecb_rate() -> None:
    assert event(event_token="rev456", revenue="1000", currency="jpy").properties["currency"] == "JPY"
    assert event(event_token="rev456", revenue="4.99", currency="EUR").properties["revenue"] == 4.99
    # Codes ISO 4217 lists that are not money a user pays with, and codes it does not list.
    for code in ("XXX", "XTS", "XAU", "XDR", "XBA", "ABC", "EURO"):
        assert run(event_token="rev456", revenue="1", currency=code) == Dropped("unknown_currency"), code
    # Valid ISO 4217 money without an ECB reference rate (ARS never had one, RUB none since 2022).
    for code in ("ARS", "RUB"):
        assert run(event_token="rev456", revenue="1", currency=code) == Dropped("currency_without_rate"), code


def test_amount_rules_drop_what_no_sum_can_hold() -> None:
    for bad in ("1e309", "nan", "inf", "-inf", "lots"):
        assert run(event_token="rev456", revenue=bad, currency="USD") == Dropped("invalid_revenue"), bad
    assert run(event_token="rev456", revenue="-50", currency="USD") == Dropped("negative_charge")
    refund = event(event_token="ref1", revenue="-50", currency="USD")  # vendors disagree on a refund's sign
    assert refund.event_type == "refund" and refund.properties["revenue"] == -50.0
    assert run(event_token="rev456", revenue="1e308", currency="USD") == Dropped("amount_out_of_bounds")
    assert run(event_token="rev456", revenue="15001", currency="EUR") == Dropped("amount_out_of_bounds")
    assert isinstance(run(event_token="rev456", revenue="14999", currency="EUR"), CanonicalEvent)
    # The bound is in EUR at the latest rate: 2 000 000 JPY is about 11 000 EUR, 3 000 000 about 17 000.
    assert 2_000_000 / LATEST["JPY"] < 15_000 < 3_000_000 / LATEST["JPY"]
    assert isinstance(run(event_token="rev456", revenue="2000000", currency="JPY"), CanonicalEvent)
    assert run(event_token="rev456", revenue="3000000", currency="JPY") == Dropped("amount_out_of_bounds")
    # Without a currency (the reporting one, unknown here) absurd amounts still drop.
    assert run(event_token="rev456", revenue="1e308") == Dropped("amount_out_of_bounds")
