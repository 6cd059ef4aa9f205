"""One builder of canonical events (`transforms.events.canonical_event`): every source's ids are
derived the same way as before it existed, from the event's own source, type and time."""

from datetime import UTC, datetime

from tests.support.money import LATEST
from transforms.api_events import api_event, canonical_json
from transforms.events import CanonicalEvent, DerivedId, canonical_event, derived_event_id
from transforms.ingest.attribution import ADAPTERS, mapping_key, normalize
from transforms.paywall_events import funnel_event

AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LATER = datetime(2026, 3, 1, 12, 5, tzinfo=UTC)


def test_a_given_id_is_kept_and_a_derived_one_hashes_the_events_own_fields() -> None:
    common = {"source": "api", "workspace_id": "ws_1", "event_type": "trial_start", "occurred_at": AT}
    given = canonical_event(**common, received_at=LATER, event_id="client-1")
    assert given == CanonicalEvent(**common, received_at=LATER, event_id="client-1")
    derived = canonical_event(**common, received_at=LATER, event_id=DerivedId(app="ws_1", user="u", raw="r"))
    expected = derived_event_id(
        source="api", app="ws_1", user="u", event_type="trial_start", occurred_at=AT, raw_event_id="r"
    )
    assert derived.event_id == expected and derived.properties == {}


def test_every_source_derives_the_ids_it_derived_before() -> None:
    props = {"price": 9.99, "platform": "iOS"}
    api = api_event(
        workspace_id="ws_1", event="trial_start", user_id="u1", occurred_at=AT, properties=props, received_at=LATER
    )
    assert api.event_id == derived_event_id(
        source="api",
        app="ws_1",
        user="u1",
        event_type="trial_start",
        occurred_at=AT,
        raw_event_id=canonical_json(props),
    )
    assert api.platform == "ios"
    funnel = funnel_event(
        workspace_id="ws_1",
        app_id="app_1",
        user_id="u1",
        event_type="impression",
        properties={"paywall_id": "p", "variant_id": "v"},
        occurred_at=AT,
        received_at=LATER,
        country="de",
        platform="ios",
    )
    funnel_props = {"paywall_id": "p", "variant_id": "v", "app_id": "app_1"}
    assert funnel.event_id == derived_event_id(
        source="paywall",
        app="app_1",
        user="u1",
        event_type=funnel.event_type,
        occurred_at=AT,
        raw_event_id=canonical_json(funnel_props),
    )
    adapter = next(iter(ADAPTERS.values()))
    params = {"app_token": "tok", "activity_kind": "install", "created_at": str(int(AT.timestamp())), "adid": "d1"}
    callback = normalize(
        params,
        adapter=adapter,
        workspace_id="ws_1",
        mapping={mapping_key(params) or "": "install"},
        received_at=LATER,
        latest_rates=LATEST,
    )
    assert isinstance(callback, CanonicalEvent)
    assert callback.event_id == derived_event_id(
        source=adapter.vendor,
        app="tok",
        user="\x1e".join(["", "d1", "", ""]),
        event_type=callback.event_type,
        occurred_at=AT,
        raw_event_id="install",
    )
