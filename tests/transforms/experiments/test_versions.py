"""App versions compare as apps number them, and ranges admit what they say (design §6)."""

from __future__ import annotations

import functools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from transforms.experiments.versions import InvalidRange, parse_range, version_key

# Small numbers often, so that equal and neighbouring versions are drawn; at most 55 characters in all
# (MAX_VERSION_LENGTH is 64).
numbers = st.one_of(st.integers(0, 3), st.integers(0, 10**6)).map(str)
words = st.text("0123456789abAZ-", min_size=1, max_size=6).filter(lambda w: not w.isdigit())
identifiers = st.one_of(numbers, words)
cores = st.lists(numbers, min_size=1, max_size=4).map(".".join)
pre_releases = st.lists(identifiers, min_size=1, max_size=3).map(".".join)
builds = st.text("0123456789azAZ.+-", min_size=1, max_size=8)
versions = st.builds(
    lambda core, pre: core + (f"-{pre}" if pre else ""),
    cores,
    st.one_of(st.none(), pre_releases),
)


def semver_order(a: str, b: str) -> int:
    """An independent reading of the rules (semver.org §11 on a core padded to four numbers),
    written as a comparator rather than a sort key."""

    def split(v: str) -> tuple[list[int], list[str] | None]:
        core, _, pre = v.partition("-")
        nums = [int(x) for x in core.split(".")]
        return nums + [0] * (4 - len(nums)), (pre.split(".") if pre else None)

    (ca, pa), (cb, pb) = split(a), split(b)
    if ca != cb:
        return -1 if ca < cb else 1
    if pa is None or pb is None:
        return (pa is None) - (pb is None)
    for x, y in zip(pa, pb, strict=False):
        if x == y or (x.isdigit() and y.isdigit() and int(x) == int(y)):
            continue
        if x.isdigit() and y.isdigit():
            return -1 if int(x) < int(y) else 1
        if x.isdigit() != y.isdigit():
            return -1 if x.isdigit() else 1
        return -1 if x < y else 1
    return (len(pa) > len(pb)) - (len(pa) < len(pb))


def key(text: str) -> object:
    parsed = version_key(text)
    assert parsed is not None, text
    return parsed


@pytest.mark.parametrize(
    ("smaller", "larger"),
    [
        ("2.0.0", "2.0.0.1"),
        ("99999.0.0", "100000.0.0"),
        ("1.0.0-beta", "1.0.0"),
        ("1.0.0-rc.2", "1.0.0-rc.10"),
        ("1.0.0-alpha", "1.0.0-alpha.1"),
        ("1.0.0-alpha.1", "1.0.0-alpha.beta"),
        ("1.0.0-beta.11", "1.0.0-rc.1"),
        ("1.9", "1.10"),
        ("1.2.3-4", "1.2.3-a"),
    ],
)
def test_growthbook_counter_examples_and_semver_examples_order_correctly(smaller: str, larger: str) -> None:
    assert key(smaller) < key(larger)
    assert parse_range(f"<{larger}").admits(version_key(smaller))
    assert not parse_range(f"<{smaller}").admits(version_key(larger))


@pytest.mark.parametrize(("a", "b"), [("1.2", "1.2.0"), ("1.2", "1.2.0.0"), ("v1.2.3", "1.2.3"), ("1.2.3+45", "1.2.3")])
def test_padding_the_v_and_the_build_make_no_difference(a: str, b: str) -> None:
    assert key(a) == key(b)
    assert parse_range(f"={a}").admits(version_key(b))


@pytest.mark.parametrize(
    "text",
    ["", "1.2.3 (45)", "1.2.3.4.5", "V1.2", "1..2", "1.2.", "-1.2", "1.2-", "\u0661.\u0662", "1" * 65, "1.2.3\n"],
)
def test_what_is_not_a_version_is_none_and_no_range_admits_it(text: str) -> None:
    assert version_key(text) is None
    assert not parse_range(">=0").admits(version_key(text))
    assert not parse_range("!=1.2.3").admits(version_key(text))


@given(versions, versions)
def test_the_order_is_the_semver_order_on_a_padded_core(a: str, b: str) -> None:
    ka, kb = key(a), key(b)
    expected = semver_order(a, b)
    assert (ka < kb, ka == kb, ka > kb) == (expected < 0, expected == 0, expected > 0)  # type: ignore[operator]


@given(st.lists(versions, min_size=3, max_size=12))
def test_the_order_is_total_and_transitive(texts: list[str]) -> None:
    keys = [key(t) for t in texts]
    ordered = sorted(keys)  # type: ignore[type-var]
    for a, b, c in zip(ordered, ordered[1:], ordered[2:], strict=False):
        assert a <= b <= c and a <= c
    # the comparator agrees with the keys' order, pair by pair: no two versions are incomparable
    by_comparator = sorted(texts, key=functools.cmp_to_key(semver_order))
    assert [key(t) for t in by_comparator] == ordered


@given(versions, builds)
def test_a_v_prefix_and_build_metadata_never_change_the_order(text: str, build: str) -> None:
    assert key(f"v{text}") == key(text) == key(f"{text}+{build}") == key(f"v{text}+{build}")


@given(versions, versions)
def test_each_operator_means_what_it_says(a: str, b: str) -> None:
    ka, kb = key(a), key(b)
    for op, holds in [
        ("=", ka == kb),
        ("!=", ka != kb),
        ("<", ka < kb),  # type: ignore[operator]
        ("<=", ka <= kb),  # type: ignore[operator]
        (">", ka > kb),  # type: ignore[operator]
        (">=", ka >= kb),  # type: ignore[operator]
    ]:
        assert parse_range(f"{op}{b}").admits(version_key(a)) == holds, (a, op, b)


def test_a_range_is_an_and_of_its_comparisons() -> None:
    r = parse_range(">=2.1.0 <3")
    assert [r.admits(version_key(v)) for v in ["2.0.9", "2.1", "2.1.0", "2.9.9.9", "3.0.0-beta", "3", "10.0"]] == [
        False,
        True,
        True,
        True,
        True,  # a pre-release of 3 sorts before 3: `<3` admits it, as semver ordering says
        False,
        False,
    ]
    assert parse_range(">= 2.1.0   < 3").text == ">=2.1.0 <3"
    assert parse_range(">=2 !=2.5.1").admits(version_key("2.5.0"))
    assert not parse_range(">=2 !=2.5.1").admits(version_key("2.5.1"))


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("2.1.0", "operator"),
        ("~2.1", "operator"),
        ("==2.1", "not a version"),
        (">=2.x", "not a version"),
        (">=", "no version"),
        (">= >= 2", "another operator"),
        (">=2.1 || <1", "operator"),
        (">=3 <2", "no version satisfies"),
        (">2 <=2", "no version satisfies"),
        ("=2 =3", "no version satisfies"),
        ("=2 !=2.0", "no version satisfies"),
        (" ".join([">=1"] * 9), "at most 8"),
        (">=" + "1" * 300, "at most 200"),
    ],
)
def test_a_range_that_cannot_be_read_is_refused_with_the_reason(text: str, says: str) -> None:
    with pytest.raises(InvalidRange, match=says):
        parse_range(text)


def test_a_range_touching_at_an_inclusive_bound_is_that_one_version() -> None:
    r = parse_range(">=2 <=2.0.0")
    assert r.admits(version_key("2")) and not r.admits(version_key("2.0.0.1"))
