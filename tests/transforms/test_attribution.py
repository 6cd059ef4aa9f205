"""The attribution adapter's mapping rules 1-5, ids and drops, as a pure function."""

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

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
MAPPING = {"abc123": "trial_start", "rev456": "renewal", "activity_kind:install": "install"}


def run(**params: str) -> CanonicalEvent | Dropped:
    base = {"app_token": "app1", "created_at": "1763700000"}
    return normalize(
        {**base, **params}, adapter=ATTRIBUTION_PROVIDER_A, workspace_id="ws_1", mapping=MAPPING, received_at=NOW
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
        {"activity_kind": "install"}, adapter=ATTRIBUTION_PROVIDER_A, workspace_id="w", mapping=MAPPING, received_at=NOW
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
    assert event(activity_kind="install", country="Germany").country is None


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
    assert event(event_token="rev456", revenue="lots").properties["revenue"] is None


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
    first = normalize(params, adapter=ATTRIBUTION_PROVIDER_A, workspace_id="w", mapping=MAPPING, received_at=NOW)
    assert first == normalize(
        params, adapter=ATTRIBUTION_PROVIDER_A, workspace_id="w", mapping=MAPPING, received_at=NOW
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
