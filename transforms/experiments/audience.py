"""Who may enter an experiment: its audience, the user's context, and whether the one admits the other.

An audience is an AND of optional conditions (issue 35; design/experiments.md §2.1). It is checked
once, when an operator writes it (`parse_audience`: clear errors naming the field), and kept in an
evaluation-ready form beside its fields, so the gateway's `matches` (its hottest path: a config read
is 1-2 ms in all) is set look-ups and tuple compares: no regex, no pydantic, no parsing per call.

The user's context comes with the config request (`context_from`: query parameters or headers, and
custom attributes in the `x-flokit-attributes` header); the caller looks up first-seen time and
entitlement only when `needs` says an audience asks for them.

A condition whose value the context lacks is false: a DE audience does not take a user whose
country is unknown. The one exception is `days_since_first_seen` (a user FloKit has never seen is
being seen now: 0 days). Every decision is listed in docs/spec-decisions.md, "Experiment audiences".
"""

from __future__ import annotations

import functools
import json
import math
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)

from transforms.experiments.versions import InvalidRange, VersionKey, VersionRange, parse_range, version_key
from transforms.ingest.validation import COUNTRIES

AttributeValue = str | int | float | bool

# What the caller must look up before `matches` when an audience asks (see `needs`).
FIRST_SEEN: Final = "first_seen"
ENTITLEMENT: Final = "entitlement"

# Custom attributes (design note §2.1): a JSON object of at most 20 keys of [a-z0-9_] up to 40
# characters, string values up to 100 characters, the header at most 2 KB (as received).
MAX_ATTRIBUTES: Final = 20
MAX_ATTRIBUTE_KEY: Final = 40
MAX_ATTRIBUTE_STRING: Final = 100
MAX_ATTRIBUTES_HEADER_BYTES: Final = 2048
_ATTRIBUTE_KEY: Final = re.compile(r"[a-z0-9_]{1,40}", re.ASCII)
# Whole numbers beyond 2**53 lose precision in JavaScript (the dashboard, most SDKs): an exact
# match on one would match differently in the client that set it.
MAX_ATTRIBUTE_INT: Final = 2**53

# 249 assigned codes today (pycountry); 250 leaves room for one more without a migration of rules.
MAX_COUNTRIES: Final = 250
# Platforms are a short open vocabulary (ios, android, web, macos, ...); 20 is all of them twice.
MAX_PLATFORMS: Final = 20
_PLATFORM: Final = re.compile(r"[a-z0-9][a-z0-9._-]{0,31}", re.ASCII)
# BCP 47: a 2-3 letter language, then subtags of 1-8 letters or digits; RFC 5646 §4.4.1 asks
# implementations to accept at least 35 characters. `_` is read as `-` (Android's and iOS's
# `en_US` identifiers).
MAX_LOCALES: Final = 250
MAX_LOCALE_LENGTH: Final = 35
_LOCALE: Final = re.compile(r"[a-z]{2,3}(?:-[a-z0-9]{1,8})*", re.ASCII)
# A CDN's country header is two characters; ones that are not an assigned ISO code (CloudFront's
# and Cloudflare's `XX` unknown, Cloudflare's `T1` Tor, `EU`, `AP`) mean "country unknown".
_COUNTRY_SHAPE: Final = re.compile(r"[A-Za-z0-9]{2}", re.ASCII)
# A century: a bound beyond it is a typo, and keeps the comparison on small integers.
MAX_DAYS: Final = 36_500

_ONE_DAY: Final = timedelta(days=1)
_MISSING: Final = object()

CONDITIONS: Final = (
    "country",
    "platform",
    "app_version",
    "locale",
    "days_since_first_seen",
    "has_active_entitlement",
    "attributes",
)


class InvalidAudience(ValueError):
    """An audience that cannot be stored: `field` is the dotted path (`audience.app_version`),
    `message` the reason, both for the API's 400 naming the field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class InvalidContext(ValueError):
    """A config request's context that cannot be read; `message` names the parameter or header
    and says why (the gateway answers 400 `{error: message}`)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class DaysRange(BaseModel):
    """Whole days since the user was first seen, both bounds inclusive, at least one given."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gte: StrictInt | None = Field(default=None, ge=0, le=MAX_DAYS)
    lte: StrictInt | None = Field(default=None, ge=0, le=MAX_DAYS)

    @model_validator(mode="after")
    def _bounds(self) -> Self:
        if self.gte is None and self.lte is None:
            raise ValueError("give gte, lte or both (whole days, 0 or more)")
        if self.gte is not None and self.lte is not None and self.gte > self.lte:
            raise ValueError(f"gte ({self.gte}) is above lte ({self.lte}): no user would match")
        return self


class Audience(BaseModel):
    """The conditions a user must all meet to enter an experiment; a None field is no condition.

    Build it with `parse_audience` (or `Audience.model_validate`): the fields are checked and
    normalised (countries upper-case, platforms lower-case, locales in BCP 47's conventional case,
    duplicates dropped), and the evaluation-ready form is computed once, there. The model is
    frozen; `model_copy(update=…)` validates again so that form follows the fields.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    country: list[StrictStr] | None = None
    platform: list[StrictStr] | None = None
    app_version: StrictStr | None = None
    locale: list[StrictStr] | None = None
    days_since_first_seen: DaysRange | None = None
    has_active_entitlement: StrictBool | None = None
    attributes: dict[str, StrictStr | StrictInt | StrictFloat | StrictBool] | None = None

    @field_validator("country")
    @classmethod
    def _countries_known(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        codes = _distinct([c.strip().upper() for c in value])
        for code in codes:
            if code not in COUNTRIES:
                raise ValueError(f'"{code}" is not an ISO 3166-1 alpha-2 country code (e.g. DE, US, BR)')
        return _sized(codes, MAX_COUNTRIES, "country codes")

    @field_validator("platform")
    @classmethod
    def _platforms_named(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        names = _distinct([p.strip().lower() for p in value])
        for name in names:
            if _PLATFORM.fullmatch(name) is None:
                raise ValueError(
                    f'"{name}" is not a platform name: 1-32 letters, digits, ".", "_" or "-" (e.g. ios, android, web)'
                )
        return _sized(names, MAX_PLATFORMS, "platforms")

    @field_validator("app_version")
    @classmethod
    def _range_readable(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return parse_range(value).text
        except InvalidRange as e:
            raise ValueError(str(e)) from None

    @field_validator("locale")
    @classmethod
    def _locales_well_formed(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        tags: dict[str, str] = {}
        for raw in value:
            folded = _folded_locale(raw)
            if folded is None:
                raise ValueError(f'"{raw}" is not a BCP 47 language tag (e.g. en, en-US, pt-BR, zh-Hant)')
            tags.setdefault(folded, _conventional_case(folded))
        return _sized(list(tags.values()), MAX_LOCALES, "locales")

    @field_validator("attributes", mode="before")
    @classmethod
    def _attributes_within_limits(cls, value: object) -> object:
        if value is None:
            return None
        return checked_attributes(value, drop_nulls=False) or None

    def model_post_init(self, context: Any, /) -> None:
        """Compute the evaluation-ready form now, once per audience, not on a request."""
        _ = self.compiled

    @functools.cached_property
    def compiled(self) -> Compiled:
        """The conditions as sets, a parsed range and tuples: what `matches` reads. A cached
        property (kept in the instance's `__dict__`, outside the fields: not dumped, not compared),
        because pydantic's private attributes cost microseconds per read on the hot path."""
        days = self.days_since_first_seen
        wanted = set()
        if days is not None:
            wanted.add(FIRST_SEEN)
        if self.has_active_entitlement is not None:
            wanted.add(ENTITLEMENT)
        return Compiled(
            countries=frozenset(self.country) if self.country is not None else None,
            platforms=frozenset(self.platform) if self.platform is not None else None,
            versions=parse_range(self.app_version) if self.app_version is not None else None,
            locales=frozenset(t.casefold() for t in self.locale) if self.locale is not None else None,
            # no upper bound: any count (a first-seen time from a bad clock may lie centuries back)
            days=None if days is None else (days.gte or 0, sys.maxsize if days.lte is None else days.lte),
            entitled=self.has_active_entitlement,
            attributes=tuple((k, _kind(v), v) for k, v in (self.attributes or {}).items()),
            needs=frozenset(wanted),
        )

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy validated again, so the evaluation-ready form follows the updated fields."""
        return self.model_validate({**self.model_dump(), **(update or {})})

    def is_everyone(self) -> bool:
        """Whether no condition is set (`parse_audience` answers None for such an audience)."""
        return all(getattr(self, name) is None for name in CONDITIONS)

    def admits(self, context: UserContext, now: datetime) -> bool:
        """`matches` for this audience."""
        return self.compiled.admits(context, now)


@dataclass(frozen=True, slots=True)
class Compiled:
    """An audience ready to evaluate: set look-ups and tuple compares only."""

    countries: frozenset[str] | None
    platforms: frozenset[str] | None
    versions: VersionRange | None
    locales: frozenset[str] | None  # case-folded
    days: tuple[int, int] | None  # inclusive bounds, a missing one as 0 or sys.maxsize
    entitled: bool | None
    attributes: tuple[tuple[str, str, AttributeValue], ...]  # (key, kind, value)
    needs: frozenset[str]

    def admits(self, context: UserContext, now: datetime) -> bool:
        """Every condition holds; a value the context lacks fails its condition (first-seen time
        excepted: never seen counts as 0 days)."""
        if self.countries is not None and context.country not in self.countries:
            return False
        if self.platforms is not None and context.platform not in self.platforms:
            return False
        if self.versions is not None and not self.versions.admits(context.app_version_key):
            return False
        if self.locales is not None and self.locales.isdisjoint(context.locale_ranges):
            return False
        if self.days is not None and not self.days[0] <= days_since(context.first_seen_at, now) <= self.days[1]:
            return False
        if self.entitled is not None and context.has_active_entitlement is not self.entitled:
            return False
        return _attributes_match(self.attributes, context.attributes)


def parse_audience(raw: object) -> Audience | None:
    """An audience as the API receives it (a JSON object, or null), checked. None, `{}` and an
    object whose conditions are all null answer None: everyone enters. Raises `InvalidAudience`
    naming the first faulty field (`audience.country`, `audience.days_since_first_seen.gte`, ...)."""
    if raw is None:
        return None
    if isinstance(raw, Audience):
        return None if raw.is_everyone() else raw
    if not isinstance(raw, Mapping):
        raise InvalidAudience("audience", "must be a JSON object of conditions, or null for everyone")
    try:
        audience = Audience.model_validate(dict(raw))
    except ValidationError as e:
        first = e.errors()[0]
        path = ".".join(["audience", *(str(part) for part in first["loc"][:2] if isinstance(part, str))])
        raise InvalidAudience(path, _message(first)) from None
    return None if audience.is_everyone() else audience


def _message(error: Any) -> str:
    """Pydantic's error in the words an operator reads."""
    kind = error["type"]
    if kind == "extra_forbidden":
        return "is not a condition; the conditions are " + ", ".join(CONDITIONS)
    if kind == "value_error":
        return str(error["ctx"]["error"])
    worded = {
        "list_type": "must be a list of strings",
        "string_type": "must be a string",
        "bool_type": "must be true or false",
        "int_type": "must be a whole number",
        "model_type": "must be an object",
        "model_attributes_type": "must be an object",
    }
    return worded.get(kind, str(error["msg"]))


@dataclass(frozen=True, slots=True)
class UserContext:
    """What a config request says about the user, normalised (country upper-case, platform
    lower-case), with the app version's sort key and the locale's matching ranges computed once.
    `first_seen_at` and `has_active_entitlement` are filled by the caller only when `needs` asks
    (`dataclasses.replace(context, first_seen_at=…)`)."""

    country: str | None = None
    platform: str | None = None
    app_version: str | None = None
    locale: str | None = None
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    first_seen_at: datetime | None = None
    has_active_entitlement: bool | None = None
    app_version_key: VersionKey | None = field(init=False, repr=False, compare=False, default=None)
    locale_ranges: frozenset[str] = field(init=False, repr=False, compare=False, default=frozenset())

    def __post_init__(self) -> None:
        if self.country is not None:
            object.__setattr__(self, "country", self.country.strip().upper())
        if self.platform is not None:
            object.__setattr__(self, "platform", self.platform.strip().lower())
        if self.app_version is not None:
            object.__setattr__(self, "app_version_key", version_key(self.app_version.strip()))
        folded = _folded_locale(self.locale) if self.locale is not None else None
        if folded is not None:
            # RFC 4647 basic filtering: a condition `en` takes `en-US`; each prefix that ends at a
            # subtag boundary is a range this locale falls in.
            parts = folded.split("-")
            object.__setattr__(self, "locale_ranges", frozenset("-".join(parts[:n]) for n in range(1, len(parts) + 1)))


def needs(audience: Audience | None) -> frozenset[str]:
    """What the caller must look up before `matches`: `first_seen` when the audience has a
    `days_since_first_seen` condition, `entitlement` when it has `has_active_entitlement`."""
    return frozenset() if audience is None else audience.compiled.needs


def matches(audience: Audience | None, context: UserContext, now: datetime) -> bool:
    """Whether the user may enter: no audience takes everyone; otherwise every condition holds."""
    return True if audience is None else audience.compiled.admits(context, now)


def days_since(first_seen_at: datetime | None, now: datetime) -> int:
    """Whole days (floored) between first seen and now; never seen, or seen "after" now (clock
    skew between hosts), is 0. A naive datetime is read as UTC."""
    if first_seen_at is None:
        return 0
    if first_seen_at.tzinfo is None:
        first_seen_at = first_seen_at.replace(tzinfo=UTC)
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return max(0, (now - first_seen_at) // _ONE_DAY)


# Where a config request carries the user's context (`context_from`): the query parameters and the
# headers, in that order; a response that depends on them varies by these headers.
CONTEXT_PARAMETERS: tuple[str, ...] = ("country", "platform", "app_version", "locale")
CONTEXT_HEADERS: tuple[str, ...] = ("x-country", "x-platform", "x-app-version", "x-locale", "x-flokit-attributes")


def context_from(query: Mapping[str, str], headers: Mapping[str, str]) -> UserContext:
    """The user's context from a config request.

    `country`, `platform`, `app_version`, `locale` come from the query parameters of those names or
    the headers `x-country`, `x-platform`, `x-app-version`, `x-locale`. For platform, app version
    and locale the query parameter wins (the app wrote both; the URL is what it chose per request).
    For the country the header wins: it is what the CDN resolved from the connection, and the
    spec lets a server-resolved country override a client's (as for events). An empty value is
    absent. Custom attributes come from `x-flokit-attributes`. Raises `InvalidContext` naming the
    parameter or header for a malformed value; an unparsable app version is not an error (the
    version conditions are then false), nor is a two-character country that is not an ISO code
    (the country is then unknown)."""
    lowered = {name.lower(): value for name, value in headers.items()}
    return UserContext(
        country=_country(*_value(query, "country", lowered, "x-country", header_wins=True)),
        platform=_platform(*_value(query, "platform", lowered, "x-platform")),
        app_version=_value(query, "app_version", lowered, "x-app-version")[1],
        locale=_locale(*_value(query, "locale", lowered, "x-locale")),
        attributes=_header_attributes(lowered.get("x-flokit-attributes")),
    )


def _value(
    query: Mapping[str, str], parameter: str, headers: Mapping[str, str], header: str, *, header_wins: bool = False
) -> tuple[str, str | None]:
    """(where the value came from, the value stripped): the first of the two sources with a
    non-empty value, the query parameter first unless `header_wins`."""
    sources = [(f"query parameter {parameter}", query.get(parameter)), (f"header {header}", headers.get(header))]
    if header_wins:
        sources.reverse()
    for source, value in sources:
        if value is not None and value.strip():
            return source, value.strip()
    return sources[0][0], None


def _country(source: str, value: str | None) -> str | None:
    if value is None:
        return None
    if _COUNTRY_SHAPE.fullmatch(value) is None:
        raise InvalidContext(f"{source}: {value[:40]!r} is not a two-letter ISO 3166-1 country code (e.g. DE)")
    code = value.upper()
    return code if code in COUNTRIES else None


def _platform(source: str, value: str | None) -> str | None:
    if value is None:
        return None
    name = value.lower()
    if _PLATFORM.fullmatch(name) is None:
        raise InvalidContext(
            f"{source}: {value[:40]!r} is not a platform name (1-32 letters, digits, '.', '_' or '-'; e.g. ios)"
        )
    return name


def _locale(source: str, value: str | None) -> str | None:
    if value is None:
        return None
    folded = _folded_locale(value)
    if folded is None:
        raise InvalidContext(f"{source}: {value[:40]!r} is not one BCP 47 language tag (e.g. en-US)")
    return _conventional_case(folded)


def _header_attributes(raw: str | None) -> dict[str, AttributeValue]:
    """The custom attributes of `x-flokit-attributes`, checked against the limits."""
    if raw is None or not raw.strip():
        return {}
    where = "header x-flokit-attributes"
    size = len(raw) if raw.isascii() or max(raw) <= "\xff" else len(raw.encode())
    if size > MAX_ATTRIBUTES_HEADER_BYTES:
        raise InvalidContext(f"{where}: {size} bytes, at most {MAX_ATTRIBUTES_HEADER_BYTES}")
    try:
        parsed = json.loads(_utf8(raw), parse_constant=_no_constant, object_pairs_hook=_no_duplicates)
    except ValueError as e:  # json.JSONDecodeError, and our refusals of NaN and repeated keys
        raise InvalidContext(f"{where}: not a JSON object ({e})") from None
    except RecursionError:  # 2 KB of "[" nests deeper than the decoder's recursion limit
        raise InvalidContext(f"{where}: nested too deeply; attributes are one flat JSON object") from None
    try:
        return checked_attributes(parsed, drop_nulls=True)
    except ValueError as e:
        raise InvalidContext(f"{where}: {e}") from None


def _utf8(raw: str) -> str:
    """WSGI hands header values over as Latin-1 text: a client's UTF-8 bytes (`é` as `Ã©`) are read
    back as UTF-8; a value that is not UTF-8 that way (already text, or real Latin-1) is kept."""
    if raw.isascii():
        return raw
    try:
        return raw.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return raw


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f'key "{key[:MAX_ATTRIBUTE_KEY]}" appears twice')
        seen[key] = value
    return seen


def checked_attributes(raw: object, *, drop_nulls: bool) -> dict[str, AttributeValue]:
    """Custom attributes within the limits of design note §2.1, for an audience's exact matches
    and for a request's header alike. Raises ValueError saying which key and why. With
    `drop_nulls`, a null value is an attribute not set (SDKs send unset optional values as null)."""
    if not isinstance(raw, Mapping):
        raise ValueError("must be a JSON object of attributes")
    if len(raw) > MAX_ATTRIBUTES:
        raise ValueError(f"{len(raw)} attributes, at most {MAX_ATTRIBUTES}")
    checked: dict[str, AttributeValue] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or _ATTRIBUTE_KEY.fullmatch(key) is None:
            raise ValueError(f'key "{str(key)[:60]}" must be 1-{MAX_ATTRIBUTE_KEY} characters of a-z, 0-9 and _')
        if value is None and drop_nulls:
            continue
        checked[key] = _attribute_value(key, value)
    return checked


def _attribute_value(key: str, value: object) -> AttributeValue:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if abs(value) > MAX_ATTRIBUTE_INT:
            raise ValueError(f'"{key}": whole numbers are at most 2^53 in size')
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f'"{key}": numbers must be finite')
        return value
    if isinstance(value, str):
        if len(value) > MAX_ATTRIBUTE_STRING:
            raise ValueError(f'"{key}": {len(value)} characters, at most {MAX_ATTRIBUTE_STRING}')
        return value
    raise ValueError(f'"{key}" must be a string, number or boolean')


def _kind(value: object) -> str:
    """How an attribute compares: booleans only with booleans (true is not 1), numbers numerically
    (1 == 1.0), strings exactly (case and spaces count)."""
    if isinstance(value, bool):
        return "bool"
    return "str" if isinstance(value, str) else "number"


def _attributes_match(expected: tuple[tuple[str, str, AttributeValue], ...], got: Mapping[str, AttributeValue]) -> bool:
    for key, kind, value in expected:
        actual = got.get(key, _MISSING)
        if actual is _MISSING or _kind(actual) != kind or actual != value:
            return False
    return True


def _folded_locale(raw: str) -> str | None:
    """A BCP 47 tag case-folded with `_` read as `-`, or None when it is not one."""
    folded = raw.strip().casefold().replace("_", "-")
    if len(folded) > MAX_LOCALE_LENGTH or _LOCALE.fullmatch(folded) is None:
        return None
    return folded


def _conventional_case(folded: str) -> str:
    """BCP 47's conventional case (RFC 5646 §2.1.1): language lower, script title, region upper."""
    parts = folded.split("-")
    out = [parts[0]]
    for part in parts[1:]:
        if len(part) == 4 and part.isalpha():
            out.append(part.title())
        elif len(part) == 2 and part.isalpha():
            out.append(part.upper())
        else:
            out.append(part)
    return "-".join(out)


def _distinct(values: list[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _sized(values: list[str], most: int, what: str) -> list[str]:
    if not values:
        raise ValueError(f"give at least one of the {what}, or leave the condition out (null) for everyone")
    if len(values) > most:
        raise ValueError(f"{len(values)} {what}, at most {most}")
    return values
