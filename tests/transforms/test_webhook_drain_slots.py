"""The two drain slots' lifetimes stay at least half a lifetime apart, so a relaunch never
leaves zero drains."""

from datetime import UTC, datetime, timedelta

from transforms.webhooks.drain_slots import other_slot, planned_end

NOW = datetime(2026, 11, 29, 12, tzinfo=UTC)
LIFE = timedelta(seconds=900)


def test_alone_a_drain_lives_its_whole_lifetime() -> None:
    assert planned_end(NOW, LIFE, None) == NOW + LIFE
    assert planned_end(NOW, LIFE, NOW - timedelta(seconds=1)) == NOW + LIFE  # the other already ended


def test_far_enough_from_the_other_slot_a_drain_lives_its_whole_lifetime() -> None:
    assert planned_end(NOW, LIFE, NOW + timedelta(seconds=300)) == NOW + LIFE  # 600 s apart


def test_started_together_the_second_drain_ends_half_a_lifetime_before_the_first() -> None:
    """Both slots launched at one tick (the first deployment): the second ends at 450 s, then
    relaunches for a whole lifetime; from then on they end 450 s apart."""
    first = planned_end(NOW, LIFE, None)
    second = planned_end(NOW + timedelta(seconds=2), LIFE, first)
    assert second == first - LIFE / 2
    relaunched = planned_end(second + timedelta(seconds=8), LIFE, first)
    assert relaunched == second + timedelta(seconds=8) + LIFE
    assert abs(relaunched - first) >= LIFE / 2


def test_slots_name_each_other() -> None:
    assert other_slot("a") == "b" and other_slot("b") == "a"
