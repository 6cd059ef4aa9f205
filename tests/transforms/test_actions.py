"""The action state machine and action content: pure rules, no database."""

from datetime import UTC, datetime

import pytest

from transforms import actions as rules
from transforms.api_events import api_event
from transforms.timefmt import parse_iso8601

T0 = datetime(2026, 11, 21, 9, 30, tzinfo=UTC)


def test_every_trigger_fires_only_from_its_statuses() -> None:
    expected = {
        "guardrails_passed": ({"draft"}, "ready"),
        "approve": ({"ready"}, "approved"),
        "reject": ({"draft", "ready"}, "rejected"),
        "start": ({"approved"}, "running"),
        "complete": ({"running"}, "completed"),
        "rollback": ({"running", "completed"}, "rolled_back"),
        # The second wave (ARCHITECTURE "Decisions for the second wave"): the engine's fade and
        # the executor's give-up, each its own trigger so the history tells them from a human's.
        "expire": ({"draft", "ready"}, "rejected"),
        "abandon": ({"approved"}, "rejected"),
    }
    assert {t: (set(s.sources), s.target) for t, s in rules.TRANSITIONS.items()} == expected
    assert set(rules.STATUSES) == {s for sources, _ in expected.values() for s in sources} | {
        target for _, target in expected.values()
    }


def test_rollback_only_for_budget_shifts_and_creative_pauses() -> None:
    assert rules.allowed_sources("rollback", "budget_shift") == {"running", "completed"}
    assert rules.allowed_sources("rollback", "creative_pause") == {"running", "completed"}
    assert rules.allowed_sources("rollback", "offer_test") == frozenset()
    assert "cannot be rolled back" in rules.refusal("rollback", "offer_test", "running")
    assert (
        rules.refusal("approve", "budget_shift", "draft")
        == "Cannot approve an action in status draft; it must be ready"
    )


@pytest.mark.parametrize(
    ("name", "stored"),
    [
        ("shift_budget", "budget_shift"),
        ("pause_creative", "creative_pause"),
        ("prepare_offer_test", "offer_test"),
        ("budget_shift", "budget_shift"),
        ("offer_test", "offer_test"),
    ],
)
def test_verb_aliases_map_to_stored_types(name: str, stored: str) -> None:
    assert rules.canonical_type(name) == stored


def test_unknown_type_names_the_accepted_ones() -> None:
    with pytest.raises(ValueError, match="shift_budget"):
        rules.canonical_type("raise_prices")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-21T09:30:00Z", T0),
        ("2026-11-21T10:30:00+01:00", T0),
        ("2026-11-21T09:30:00", T0),  # no offset: UTC
        ("2026-11-21 09:30:00.000Z", T0),
    ],
)
def test_iso8601_inputs(text: str, expected: datetime) -> None:
    assert parse_iso8601(text) == expected


@pytest.mark.parametrize("text", ["yesterday", "1732181400", "", "1999-12-31T23:59:59Z", "2100-01-01T00:00:00Z"])
def test_bad_timestamps_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="must be"):
        parse_iso8601(text)


def test_api_event_ids_are_stable_and_content_sensitive() -> None:
    base = {
        "workspace_id": "ws_a",
        "event": "purchase",
        "user_id": "u1",
        "occurred_at": T0,
        "properties": {"price": 9.99, "currency": "USD", "platform": "iOS", "country": "de"},
        "received_at": T0,
    }
    first = api_event(**base)
    assert first.event_id == api_event(**{**base, "received_at": datetime.now(UTC)}).event_id
    assert first.event_id != api_event(**{**base, "properties": {"price": 4.99}}).event_id
    assert first.event_id != api_event(**{**base, "workspace_id": "ws_b"}).event_id
    assert api_event(**base, event_id="client-1").event_id == "client-1"
    assert (first.source, first.platform, first.country) == ("api", "ios", "DE")


def test_a_clients_own_proposal_claims_nothing_was_evaluated() -> None:
    own = rules.client_content("offer_test", proposed_by="API key key_1", reason=None)
    assert own.title == "Offer test proposed by API key key_1"
    assert "FloKit evaluated nothing" in own.rationale
    assert (own.data_signals, own.guardrail_checks, own.rollback_conditions) == ([], [], [])
    assert own.expected_impact == {"metric": "not_estimated", "direction": "not_estimated", "magnitude": 0.0}
    assert own.guardrails_pass  # nothing failed: answered ready_for_approval, as the spec says
    assert rules.client_content("budget_shift", proposed_by="x", reason="Q4 push").rationale == "Q4 push"


def test_evaluation_summaries_prefer_what_the_producer_wrote() -> None:
    assert rules.evaluation_summary("monitor", "breach", {"summary": " CPI 41% above baseline "}) == (
        "CPI 41% above baseline"
    )
    assert rules.evaluation_summary("preflight", "refused", {}) == "Executor preflight: refused"
    assert rules.evaluation_summary("proposal", "proposed", {"summary": 3}) == "Engine proposal: proposed"
