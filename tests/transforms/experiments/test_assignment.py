"""First assignment: uniform, independent across experiments (salts) and across purposes."""

from __future__ import annotations

import pytest

from tests.support.paywalls import document
from transforms import paywall
from transforms.experiments.assignment import HOLDOUT, Weighted, draw, expected_shares, first_assignment, pick
from transforms.experiments.serving import first_variant

USERS = [f"user-{i}" for i in range(20_000)]


def test_the_split_follows_the_weights_and_the_holdout() -> None:
    variants = [Weighted("a", 1), Weighted("b", 3), Weighted("off", 0)]
    got = [first_assignment(b"salt-1", variants, 10, u) for u in USERS]
    share = {k: got.count(k) / len(got) for k in ("a", "b", "off", HOLDOUT)}
    expected = expected_shares(variants, 10)
    assert expected == pytest.approx({"a": 0.225, "b": 0.675, "off": 0.0, HOLDOUT: 0.1})
    for cell, p in expected.items():
        se = (p * (1 - p) / len(USERS)) ** 0.5
        assert abs(share[cell] - p) <= 4 * se + 1e-12, (cell, share[cell], p)


def test_two_experiments_on_one_paywall_bucket_users_independently() -> None:
    """The old per-paywall hash put the users of "b" in "b" again; per-experiment salts do not."""
    halves = [Weighted("a", 1), Weighted("b", 1)]
    first = [first_assignment(b"salt-1", halves, 0, u) for u in USERS]
    second = [first_assignment(b"salt-2", halves, 0, u) for u in USERS]
    same = sum(x == y for x, y in zip(first, second, strict=True)) / len(USERS)
    assert abs(same - 0.5) <= 4 * (0.25 / len(USERS)) ** 0.5


def test_a_holdout_change_moves_no_variant_user_between_variants() -> None:
    halves = [Weighted("a", 1), Weighted("b", 1)]
    before = {u: first_assignment(b"s", halves, 20, u) for u in USERS}
    after = {u: first_assignment(b"s", halves, 5, u) for u in USERS}
    assert all(after[u] == v for u, v in before.items() if v != HOLDOUT)


def test_draws_are_stable_and_pick_refuses_no_traffic() -> None:
    assert draw(b"s", "variant", "u") == draw(b"s", "variant", "u") != draw(b"s", "holdout", "u")
    assert pick([Weighted("a", 0), Weighted("b", 2)], 0.0) == "b"
    assert pick([Weighted("a", 1)], 0.9999999999) == "a"
    with pytest.raises(ValueError, match="weight above 0"):
        pick([Weighted("a", 0)], 0.5)


def test_a_migrated_experiment_keeps_the_documents_buckets() -> None:
    """No salt: the variant is the one `experiment_active` gave the user before the migration."""
    doc = document([1, 2, 0, 1])
    weights = [Weighted(v.variant_id, v.traffic_weight) for v in doc.variants]
    for user in USERS[:2000]:
        before = paywall.assign_variant(doc, app_id="app_1", paywall_id="onboarding", identity=user).variant_id
        assert first_variant(None, weights, 0, app_id="app_1", paywall_id="onboarding", identity=user) == before


def test_a_draw_is_settled_only_when_every_version_gives_the_same_variant() -> None:
    """The gateway skips reading the recorded exposure exactly when it cannot differ from the draw."""
    from transforms.experiments.serving import settled_draw

    v1 = ([Weighted("a", 1), Weighted("b", 1)], 0.0)
    v2 = ([Weighted("a", 0), Weighted("b", 1)], 0.0)
    where = {"app_id": "app_1", "paywall_id": "onboarding"}
    settled = unsettled = 0
    for user in USERS[:2000]:
        first = first_assignment(b"s", v1[0], 0, user)
        assert settled_draw(b"s", v1, [v1], identity=user, **where) == first  # one version: always settled
        got = settled_draw(b"s", v2, [v1, v2], identity=user, **where)
        if first == "b":
            assert got == "b"  # b under both splits
            settled += 1
        else:
            assert got is None  # a under the first, b now: only the record can say
            unsettled += 1
    assert settled > 800 and unsettled > 800
