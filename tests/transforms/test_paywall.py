"""Paywall documents and variant assignment: valid documents only, deterministic weighted splits."""

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.paywalls import document, offer
from transforms import paywall


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"variants": []}, "variants"),
        ({"variants": [{"variant_id": "a", "layout": "x", "offers": [], "traffic_weight": 1}]}, "offers"),
        ({"variants": [{"variant_id": "a", "layout": "x", "offers": [offer() | {"currency": "usd"}]}]}, "currency"),
        (
            {"variants": [{"variant_id": "a", "layout": "x", "offers": [offer() | {"billing_period": "daily"}]}]},
            "billing_period",
        ),
        ({"variants": [{"variant_id": "a", "layout": "x", "offers": [offer()], "traffic_weight": -1}]}, "traffic"),
        ({"variants": [{"variant_id": "a", "layout": "x", "offers": [offer()], "traffic_weight": 1, "x": 1}]}, "x"),
        (
            {
                "experiment_active": True,
                "variants": [{"variant_id": "a", "layout": "x", "offers": [offer()], "traffic_weight": 0}],
            },
            "traffic_weight > 0",
        ),
        (
            {"variants": [{"variant_id": "a", "layout": "x", "offers": [offer()], "traffic_weight": 1}] * 2},
            "distinct",
        ),
        ("not an object", "document"),
    ],
)
def test_invalid_documents_are_refused_with_the_reason(raw: object, message: str) -> None:
    with pytest.raises(paywall.InvalidDocument, match=message):
        paywall.parse_document(raw)


def test_without_an_active_experiment_everyone_gets_the_first_variant() -> None:
    doc = document([0, 100], active=False)
    assert {
        paywall.assign_variant(doc, app_id="app_1", paywall_id="p", identity=f"u{i}").variant_id for i in range(200)
    } == {"v0"}


@settings(max_examples=50, deadline=None)
@given(weights=st.lists(st.integers(0, 100), min_size=1, max_size=5).filter(any), identity=st.text(max_size=40))
def test_assignment_is_deterministic_and_never_picks_a_zero_weight(weights: list[int], identity: str) -> None:
    doc = document([float(w) for w in weights])
    first = paywall.assign_variant(doc, app_id="app_1", paywall_id="onboarding", identity=identity)
    again = paywall.assign_variant(doc, app_id="app_1", paywall_id="onboarding", identity=identity)
    assert first == again
    assert first.traffic_weight > 0


def test_splits_follow_the_weights() -> None:
    doc = document([10, 30, 60])
    n = 20_000
    counts = Counter(
        paywall.assign_variant(doc, app_id="app_1", paywall_id="onboarding", identity=f"user-{i}").variant_id
        for i in range(n)
    )
    for variant, weight in (("v0", 0.1), ("v1", 0.3), ("v2", 0.6)):
        assert abs(counts[variant] / n - weight) < 0.015, counts  # about 4.5 standard errors


def test_a_user_can_land_in_different_variants_of_different_paywalls() -> None:
    doc = document([50, 50])
    picks = {
        paywall.assign_variant(doc, app_id="app_1", paywall_id=f"p{i}", identity="same-user").variant_id
        for i in range(40)
    }
    assert picks == {"v0", "v1"}  # the bucket depends on the paywall, not only on the user


def test_served_and_fallback_shapes() -> None:
    doc = document([1])
    body = paywall.served("onboarding", 3, doc.variants[0])
    assert body["version"] == 3 and body["fallbackUsed"] is False
    assert body["variant"]["offers"][0]["price_usd_cents"] == 699
    assert "cta_copy" not in body["variant"]  # optional, omitted when not set
    assert paywall.fallback("onboarding") == {
        "paywall_id": "onboarding",
        "version": 0,
        "variant": {"variant_id": "control", "layout": "standard", "offers": [], "traffic_weight": 0},
        "fallbackUsed": True,
    }
