"""Audiences: what an operator may write, what a config request says, and who gets in (issue 35)."""

from __future__ import annotations

import dataclasses
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from werkzeug.test import EnvironBuilder
from werkzeug.wrappers import Request

from transforms.experiments.audience import (
    ENTITLEMENT,
    FIRST_SEEN,
    Audience,
    InvalidAudience,
    InvalidContext,
    UserContext,
    context_from,
    matches,
    needs,
    parse_audience,
)
from transforms.experiments.versions import parse_range, version_key

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
DE_IOS = UserContext(country="DE", platform="ios", app_version="2.3.1", locale="de-DE", attributes={"plan": "pro"})


def audience(**conditions: Any) -> Audience:
    parsed = parse_audience(conditions)
    assert parsed is not None
    return parsed


# --- what an operator may write ---------------------------------------------------------------


@pytest.mark.parametrize("raw", [None, {}, {"country": None, "attributes": None}, {"attributes": {}}])
def test_no_condition_is_everyone(raw: object) -> None:
    assert parse_audience(raw) is None
    assert matches(None, UserContext(), NOW)
    assert needs(None) == frozenset()


def test_conditions_are_stored_normalised() -> None:
    a = audience(
        country=["de", " AT", "DE"],
        platform=["iOS", "android", "ios"],
        locale=["EN", "pt_br", "zh-hant-tw", "en"],
        app_version=">= 2.1.0   <3",
    )
    assert a.country == ["DE", "AT"]
    assert a.platform == ["ios", "android"]
    assert a.locale == ["en", "pt-BR", "zh-Hant-TW"]
    assert a.app_version == ">=2.1.0 <3"
    assert parse_audience(a.model_dump(mode="json")) == a
    assert parse_audience(a) is a


@pytest.mark.parametrize(
    ("raw", "field", "says"),
    [
        (["DE"], "audience", "JSON object"),
        ({"countries": ["DE"]}, "audience.countries", "not a condition; the conditions are country, platform"),
        ({"country": "DE"}, "audience.country", "list of strings"),
        ({"country": ["DE", "XX"]}, "audience.country", '"XX" is not an ISO 3166-1 alpha-2'),
        ({"country": ["DEU"]}, "audience.country", "not an ISO 3166-1"),
        ({"country": []}, "audience.country", "at least one"),
        ({"country": [1]}, "audience.country", "must be a string"),
        ({"platform": ["i os"]}, "audience.platform", "not a platform name"),
        ({"platform": [f"p{i}" for i in range(21)]}, "audience.platform", "21 platforms, at most 20"),
        ({"app_version": "2.1"}, "audience.app_version", "operator"),
        ({"app_version": ">=3 <2"}, "audience.app_version", "no version satisfies"),
        ({"app_version": ">=two"}, "audience.app_version", "not a version"),
        ({"app_version": 2}, "audience.app_version", "must be a string"),
        ({"locale": ["english"]}, "audience.locale", "not a BCP 47 language tag"),
        ({"locale": ["en-US,en;q=0.9"]}, "audience.locale", "not a BCP 47"),
        ({"days_since_first_seen": {}}, "audience.days_since_first_seen", "give gte, lte or both"),
        ({"days_since_first_seen": {"gte": 8, "lte": 7}}, "audience.days_since_first_seen", "no user would match"),
        ({"days_since_first_seen": {"gte": -1}}, "audience.days_since_first_seen.gte", "greater than or equal to 0"),
        ({"days_since_first_seen": {"gte": "3"}}, "audience.days_since_first_seen.gte", "whole number"),
        ({"days_since_first_seen": {"gte": 1.5}}, "audience.days_since_first_seen.gte", "whole number"),
        ({"days_since_first_seen": {"gt": 1}}, "audience.days_since_first_seen.gt", "not a condition"),
        ({"days_since_first_seen": 7}, "audience.days_since_first_seen", "must be an object"),
        ({"has_active_entitlement": "yes"}, "audience.has_active_entitlement", "true or false"),
        ({"has_active_entitlement": 1}, "audience.has_active_entitlement", "true or false"),
        ({"attributes": {"Plan": "pro"}}, "audience.attributes", 'key "Plan" must be 1-40 characters'),
        ({"attributes": {"plan": None}}, "audience.attributes", '"plan" must be a string, number or boolean'),
        ({"attributes": {"plan": ["a"]}}, "audience.attributes", "string, number or boolean"),
        ({"attributes": {"plan": "x" * 101}}, "audience.attributes", "101 characters, at most 100"),
        ({"attributes": {f"k{i}": 1 for i in range(21)}}, "audience.attributes", "21 attributes, at most 20"),
        ({"attributes": {"n": float("nan")}}, "audience.attributes", "finite"),
        ({"attributes": "plan=pro"}, "audience.attributes", "JSON object of attributes"),
    ],
)
def test_a_faulty_audience_is_refused_naming_the_field(raw: object, field: str, says: str) -> None:
    with pytest.raises(InvalidAudience) as refused:
        parse_audience(raw)
    assert refused.value.field == field
    assert says in refused.value.message


def test_every_assigned_country_is_accepted() -> None:
    from transforms.ingest.validation import COUNTRIES

    assert audience(country=sorted(COUNTRIES)).country == sorted(COUNTRIES)


def test_a_copy_with_changes_is_checked_and_evaluates_the_new_conditions() -> None:
    de = audience(country=["DE"])
    fr = de.model_copy(update={"country": ["fr"]})
    assert fr.country == ["FR"]
    assert not matches(fr, DE_IOS, NOW) and matches(fr, dataclasses.replace(DE_IOS, country="FR"), NOW)
    with pytest.raises(ValueError, match="not an ISO"):
        de.model_copy(update={"country": ["XX"]})


# --- who gets in --------------------------------------------------------------------------------


def test_every_condition_must_hold() -> None:
    a = audience(country=["DE", "AT"], platform=["ios"], app_version=">=2.1.0 <3", locale=["de"])
    assert matches(a, DE_IOS, NOW)
    for changed in [
        {"country": "FR"},
        {"platform": "android"},
        {"app_version": "3.0.0"},
        {"app_version": "2.0.9"},
        {"locale": "en-DE"},
    ]:
        assert not matches(a, dataclasses.replace(DE_IOS, **changed), NOW), changed


@pytest.mark.parametrize(
    ("condition", "missing"),
    [
        ({"country": ["DE"]}, {"country": None}),
        ({"platform": ["ios"]}, {"platform": None}),
        ({"app_version": ">=1"}, {"app_version": None}),
        ({"app_version": ">=1"}, {"app_version": "2.3.1 (45)"}),  # unparsable: the condition is false
        ({"app_version": "!=9"}, {"app_version": "latest"}),
        ({"locale": ["de"]}, {"locale": None}),
        ({"has_active_entitlement": False}, {"has_active_entitlement": None}),
        ({"attributes": {"plan": "pro"}}, {"attributes": {}}),
    ],
)
def test_a_value_the_context_lacks_fails_its_condition(condition: dict[str, Any], missing: dict[str, Any]) -> None:
    a = audience(**condition)
    assert matches(a, dataclasses.replace(DE_IOS, has_active_entitlement=False), NOW)
    assert not matches(a, dataclasses.replace(DE_IOS, **missing), NOW)


@pytest.mark.parametrize(
    ("condition", "locale", "admitted"),
    [
        ("en", "en", True),
        ("en", "en-US", True),
        ("en", "EN_us", True),
        ("en", "en-Latn-US", True),
        ("en", "eng", False),  # a prefix counts only at a subtag boundary
        ("en-US", "en", False),  # a region condition asks for that region
        ("en-US", "en-us", True),
        ("en-US", "en-GB", False),
        ("zh-Hant", "zh-hant-TW", True),
        ("zh-Hant", "zh-TW", False),
    ],
)
def test_a_locale_condition_takes_the_tag_and_its_more_specific_tags(
    condition: str, locale: str, admitted: bool
) -> None:
    assert matches(audience(locale=[condition]), UserContext(locale=locale), NOW) is admitted


@pytest.mark.parametrize(
    ("first_seen", "bounds", "admitted"),
    [
        (NOW - timedelta(days=7), {"gte": 7}, True),
        (NOW - timedelta(days=7) + timedelta(seconds=1), {"gte": 7}, False),  # 6 days 23:59:59 is 6 whole days
        (NOW - timedelta(days=7, hours=23), {"lte": 7}, True),
        (NOW - timedelta(days=8), {"lte": 7}, False),
        (NOW - timedelta(days=3), {"gte": 1, "lte": 7}, True),
        (None, {"lte": 0}, True),  # never seen: being seen now, 0 days
        (None, {"gte": 1}, False),
        (NOW + timedelta(hours=2), {"lte": 0}, True),  # another host's clock ahead: 0 days, not -1
        (datetime(1900, 1, 1, tzinfo=UTC), {"gte": 7}, True),  # a bad clock's centuries still count
        (datetime(2026, 11, 22, 12, 0), {"gte": 7}, True),  # naive: read as UTC  # noqa: DTZ001
    ],
)
def test_days_since_first_seen_counts_whole_days(
    first_seen: datetime | None, bounds: dict[str, int], admitted: bool
) -> None:
    a = audience(days_since_first_seen=bounds)
    assert needs(a) == frozenset({FIRST_SEEN})
    assert matches(a, UserContext(first_seen_at=first_seen), NOW) is admitted


def test_entitlement_and_attribute_conditions() -> None:
    paying = audience(has_active_entitlement=True)
    assert needs(paying) == frozenset({ENTITLEMENT})
    assert matches(paying, UserContext(has_active_entitlement=True), NOW)
    assert not matches(paying, UserContext(has_active_entitlement=False), NOW)
    both = audience(has_active_entitlement=False, days_since_first_seen={"lte": 3}, country=["DE"])
    assert needs(both) == frozenset({ENTITLEMENT, FIRST_SEEN})
    assert needs(audience(country=["DE"])) == frozenset()

    a = audience(attributes={"plan": "pro", "level": 3, "beta": True, "score": 0.5})
    ok = {"plan": "pro", "level": 3.0, "beta": True, "score": 0.5, "other": "x"}
    assert matches(a, UserContext(attributes=ok), NOW)
    for changed in [{"plan": "Pro"}, {"level": "3"}, {"beta": 1}, {"beta": "true"}, {"score": 0.25}]:
        assert not matches(a, UserContext(attributes={**ok, **changed}), NOW), changed
    assert not matches(audience(attributes={"n": 1}), UserContext(attributes={"n": True}), NOW)


# --- what a config request says -----------------------------------------------------------------


def test_the_context_is_read_from_query_parameters_or_headers() -> None:
    ctx = context_from(
        {"country": "de", "platform": "iOS", "app_version": "2.3.1", "locale": "de_DE"},
        {"X-Flokit-Attributes": '{"plan": "pro", "level": 3, "beta": false, "gone": null}'},
    )
    assert (ctx.country, ctx.platform, ctx.app_version, ctx.locale) == ("DE", "ios", "2.3.1", "de-DE")
    assert ctx.attributes == {"plan": "pro", "level": 3, "beta": False}
    from_headers = context_from(
        {}, {"X-Country": "AT", "x-platform": "android", "X-App-Version": "v1.0", "X-Locale": "de-AT"}
    )
    assert (from_headers.country, from_headers.platform, from_headers.app_version, from_headers.locale) == (
        "AT",
        "android",
        "v1.0",
        "de-AT",
    )
    assert context_from({}, {}) == UserContext()


def test_the_query_wins_except_for_the_country_the_cdn_resolved() -> None:
    ctx = context_from(
        {"country": "FR", "platform": "web", "app_version": "3.0", "locale": "fr"},
        {"x-country": "DE", "x-platform": "ios", "x-app-version": "2.0", "x-locale": "de"},
    )
    assert (ctx.country, ctx.platform, ctx.app_version, ctx.locale) == ("DE", "web", "3.0", "fr")
    # an empty value is absent: the other source is read
    assert context_from({"country": "FR", "platform": ""}, {"x-country": " ", "x-platform": "ios"}).country == "FR"
    assert context_from({"platform": ""}, {"x-platform": "ios"}).platform == "ios"


@pytest.mark.parametrize("code", ["XX", "T1", "zz", "EU"])
def test_a_country_code_that_is_not_iso_is_an_unknown_country(code: str) -> None:
    ctx = context_from({}, {"x-country": code})
    assert ctx.country is None
    assert not matches(audience(country=["DE"]), ctx, NOW)
    assert matches(audience(platform=["ios"]), dataclasses.replace(ctx, platform="ios"), NOW)


def test_an_unparsable_app_version_is_kept_and_fails_version_conditions_only() -> None:
    ctx = context_from({"app_version": "2.3.1 (45)", "country": "DE"}, {})
    assert ctx.app_version == "2.3.1 (45)"
    assert not matches(audience(app_version=">=1"), ctx, NOW)
    assert matches(audience(country=["DE"]), ctx, NOW)


@pytest.mark.parametrize(
    ("query", "headers", "says"),
    [
        ({"country": "Germany"}, {}, "query parameter country: 'Germany' is not a two-letter"),
        ({}, {"x-country": "D"}, "header x-country: 'D' is not a two-letter"),
        ({"platform": "i os"}, {}, "query parameter platform: 'i os' is not a platform name"),
        ({}, {"x-platform": "x" * 33}, "header x-platform"),
        ({"locale": "en-US,en;q=0.9"}, {}, "query parameter locale: 'en-US,en;q=0.9' is not one BCP 47"),
        ({}, {"x-locale": "C.UTF-8"}, "header x-locale"),
        ({}, {"x-flokit-attributes": "plan=pro"}, "header x-flokit-attributes: not a JSON object"),
        ({}, {"x-flokit-attributes": "[1, 2]"}, "header x-flokit-attributes: must be a JSON object"),
        ({}, {"x-flokit-attributes": '{"a": 1, "a": 2}'}, 'key "a" appears twice'),
        ({}, {"x-flokit-attributes": '{"a": NaN}'}, "NaN is not a JSON number"),
        ({}, {"x-flokit-attributes": '{"a": 1e400}'}, "finite"),
        ({}, {"x-flokit-attributes": '{"a": 9007199254740993}'}, "at most 2^53"),
        ({}, {"x-flokit-attributes": '{"a": {"b": 1}}'}, '"a" must be a string, number or boolean'),
        ({}, {"x-flokit-attributes": '{"Plan": "pro"}'}, 'key "Plan" must be 1-40 characters of a-z, 0-9 and _'),
        ({}, {"x-flokit-attributes": json.dumps({"k" * 41: 1})}, "1-40 characters"),
        ({}, {"x-flokit-attributes": json.dumps({"s": "x" * 101})}, '"s": 101 characters, at most 100'),
        ({}, {"x-flokit-attributes": json.dumps({f"k{i}": i for i in range(21)})}, "21 attributes, at most 20"),
        ({}, {"x-flokit-attributes": json.dumps({"s": "x" * 2100})}, "bytes, at most 2048"),
        ({}, {"x-flokit-attributes": "[" * 2000}, "nested too deeply"),
        ({}, {"x-flokit-attributes": '{"a": [[[1]]]}'}, '"a" must be a string, number or boolean'),
    ],
)
def test_a_malformed_context_value_is_a_clear_refusal(
    query: dict[str, str], headers: dict[str, str], says: str
) -> None:
    with pytest.raises(InvalidContext) as refused:
        context_from(query, headers)
    assert says in refused.value.message


def test_attribute_text_arrives_as_utf8_through_a_latin1_header() -> None:
    sent = json.dumps({"city": "Köln"}, ensure_ascii=False)
    as_wsgi_hands_it_over = sent.encode().decode("latin-1")
    assert context_from({}, {"x-flokit-attributes": as_wsgi_hands_it_over}).attributes == {"city": "Köln"}
    assert context_from({}, {"x-flokit-attributes": sent}).attributes == {"city": "Köln"}
    assert context_from({}, {"x-flokit-attributes": json.dumps({"city": "Köln"})}).attributes == {"city": "Köln"}


@given(
    st.dictionaries(
        st.from_regex(r"[a-z0-9_]{1,40}", fullmatch=True),
        st.one_of(
            st.text(max_size=100),
            st.integers(-(2**53), 2**53),
            st.floats(allow_nan=False, allow_infinity=False),
            st.booleans(),
        ),
        max_size=20,
    )
)
def test_attributes_a_client_sends_match_an_audience_that_asks_for_them(attributes: dict[str, Any]) -> None:
    header = json.dumps(attributes)
    if len(header) > 2048:
        with pytest.raises(InvalidContext, match="at most 2048"):
            context_from({}, {"x-flokit-attributes": header})
        return
    ctx = context_from({}, {"x-flokit-attributes": header})
    assert ctx.attributes == attributes
    assert matches(parse_audience({"attributes": attributes}), ctx, NOW)


def test_evaluation_is_cheap_enough_for_the_config_read() -> None:
    """The gateway calls matches() per running experiment on every config read (~1-2 ms in all):
    a full audience must cost microseconds. The bound is about 9x what a shared 2-core host measures (6 µs)."""
    a = audience(
        country=["DE", "AT", "CH"],
        platform=["ios", "android"],
        app_version=">=2.1.0 <3 !=2.5.0",
        locale=["de", "en"],
        days_since_first_seen={"gte": 0, "lte": 30},
        has_active_entitlement=False,
        attributes={"plan": "free", "level": 3},
    )
    ctx = dataclasses.replace(
        DE_IOS,
        attributes={"plan": "free", "level": 3},
        first_seen_at=NOW - timedelta(days=2),
        has_active_entitlement=False,
    )
    assert matches(a, ctx, NOW)
    runs = 20_000
    started = time.perf_counter()
    for _ in range(runs):
        matches(a, ctx, NOW)
    per_call = (time.perf_counter() - started) / runs
    assert per_call < 50e-6, f"{per_call * 1e6:.1f} µs per call"


def test_the_context_reads_werkzeugs_own_request_structures() -> None:
    """What the gateway passes: a MultiDict of query parameters and a WSGI environ's headers,
    which are case-insensitive and carry header bytes as Latin-1 text."""
    environ = EnvironBuilder(
        path="/api/paywall/config",
        query_string="platform=ios&platform=web&country=",
        headers={"X-Country": "at", "X-Locale": "de_AT"},
    ).get_environ()
    environ["HTTP_X_FLOKIT_ATTRIBUTES"] = (
        json.dumps({"city": "Wien-Döbling"}, ensure_ascii=False).encode().decode("latin-1")
    )
    request = Request(environ)
    ctx = context_from(request.args, request.headers)
    assert (ctx.country, ctx.platform, ctx.locale) == ("AT", "ios", "de-AT")  # the first of repeated parameters
    assert ctx.attributes == {"city": "Wien-Döbling"}


# A small universe, so that random audiences and contexts often meet.
COUNTRY_CODES = ["DE", "AT", "FR"]
PLATFORMS = ["ios", "android", "web"]
RANGES = [">=2", "<2.5", ">=1.0.0 <2.0.0", "!=2.3.1", "=2.3"]
APP_VERSIONS = ["1.9.9", "2.0.0-beta", "2.3", "2.3.1", "3.0", "2.3.1 (45)"]
LOCALE_CONDITIONS = ["en", "en-US", "de", "de-AT"]
LOCALES = ["en", "en-US", "en-GB", "de", "de-AT", "de-DE", "fr"]
ATTRIBUTE_VALUES = st.sampled_from(["pro", "free", 1, 2.0, True, False])


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


raw_audiences = st.fixed_dictionaries(
    {
        "country": maybe(st.lists(st.sampled_from(COUNTRY_CODES), min_size=1, max_size=3)),
        "platform": maybe(st.lists(st.sampled_from(PLATFORMS), min_size=1, max_size=2)),
        "app_version": maybe(st.sampled_from(RANGES)),
        "locale": maybe(st.lists(st.sampled_from(LOCALE_CONDITIONS), min_size=1, max_size=2)),
        "days_since_first_seen": maybe(
            st.sampled_from([{"gte": 0}, {"lte": 0}, {"gte": 1, "lte": 7}, {"gte": 7}, {"lte": 30}])
        ),
        "has_active_entitlement": maybe(st.booleans()),
        "attributes": maybe(st.dictionaries(st.sampled_from(["plan", "level"]), ATTRIBUTE_VALUES, max_size=2)),
    }
)
contexts = st.builds(
    UserContext,
    country=maybe(st.sampled_from(COUNTRY_CODES)),
    platform=maybe(st.sampled_from(PLATFORMS)),
    app_version=maybe(st.sampled_from(APP_VERSIONS)),
    locale=maybe(st.sampled_from(LOCALES)),
    attributes=st.dictionaries(st.sampled_from(["plan", "level", "other"]), ATTRIBUTE_VALUES, max_size=3),
    first_seen_at=maybe(st.integers(0, 40 * 24).map(lambda hours: NOW - timedelta(hours=hours))),
    has_active_entitlement=maybe(st.booleans()),
)


def reference(raw: dict[str, Any], ctx: UserContext) -> bool:
    """The documented rules read literally, condition by condition, from the raw audience."""
    checks = []
    if raw["country"] is not None:
        checks.append(ctx.country in raw["country"])
    if raw["platform"] is not None:
        checks.append(ctx.platform in raw["platform"])
    if raw["app_version"] is not None:
        checks.append(parse_range(raw["app_version"]).admits(version_key(ctx.app_version or "")))
    if raw["locale"] is not None:
        tag = (ctx.locale or "").lower()
        checks.append(any(tag == c.lower() or tag.startswith(c.lower() + "-") for c in raw["locale"]))
    if raw["days_since_first_seen"] is not None:
        days = 0 if ctx.first_seen_at is None else (NOW - ctx.first_seen_at).days
        bounds = raw["days_since_first_seen"]
        checks.append(bounds.get("gte", 0) <= days <= bounds.get("lte", 10**9))
    if raw["has_active_entitlement"] is not None:
        checks.append(ctx.has_active_entitlement is raw["has_active_entitlement"])
    for key, value in (raw["attributes"] or {}).items():
        got = ctx.attributes.get(key)
        same_kind = isinstance(got, bool) == isinstance(value, bool) and isinstance(got, str) == isinstance(value, str)
        checks.append(key in ctx.attributes and same_kind and got == value)
    return all(checks)


@given(raw_audiences, contexts)
def test_matches_follows_the_documented_rules(raw: dict[str, Any], ctx: UserContext) -> None:
    a = parse_audience(raw)
    assert matches(a, ctx, NOW) == reference(raw, ctx)
    wanted = {FIRST_SEEN} if raw["days_since_first_seen"] else set()
    if raw["has_active_entitlement"] is not None:
        wanted.add(ENTITLEMENT)
    assert needs(a) == wanted
