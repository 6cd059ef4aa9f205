"""App versions and version ranges for experiment audiences (design/experiments.md §6).

Versions are parsed, never compared as strings: GrowthBook's padded-string comparison puts
`1.2` before `1.2.0`, `2.0.0.1` before `2.0.0` and `100000.0.0` before `99999.0.0`, and the
`semver` package refuses `1.2`, `v1.2.3` and `1.2.3.4`, all of which apps ship. The rules:

- `^v?(\\d+)(\\.\\d+){0,3}(-[0-9A-Za-z.-]+)?(\\+.*)?$`, ASCII digits only;
- the numeric core is padded to four numbers (missing ones are 0), so `1.2 == 1.2.0 == 1.2.0.0`;
- a pre-release sorts before its release, its dot-separated identifiers compared as semver.org
  §11 says (numeric ones numerically, `rc.2 < rc.10`; numeric before alphanumeric; alphanumeric
  ones in ASCII order; more identifiers after an equal prefix sort later);
- `+build` is ignored, and so is the `v`.

A version becomes a tuple (`version_key`) whose natural order is that order, and a range is
parsed once into (operator, tuple) pairs: evaluating it is a few tuple comparisons, which is what
the gateway's hot path can afford.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

# One pre-release identifier as a sortable triple: numeric ones (0, n, "") sort before
# alphanumeric ones (1, 0, text), and within a kind by value (semver.org §11.4.1-3).
Identifier = tuple[int, int, str]
# (the four numbers of the core, 1 for a release or 0 for a pre-release, the pre-release's
# identifiers): a release sorts after every pre-release of the same core (§11.3), and a longer
# list of identifiers after an equal prefix sorts later (§11.4.4), as tuples compare.
VersionKey = tuple[tuple[int, int, int, int], int, tuple[Identifier, ...]]

_VERSION: Final = re.compile(r"v?(\d+(?:\.\d+){0,3})(?:-([0-9A-Za-z.-]+))?(?:\+.*)?", re.ASCII | re.DOTALL)
# Longer than any version an app store accepts (Apple: three integers; Google: a 4 000-character
# versionName is allowed but nobody ships one): a bound keeps int() from parsing a megabyte of digits.
MAX_VERSION_LENGTH: Final = 64
# A range is a handful of comparisons; more is a mistake, not a need.
MAX_RANGE_LENGTH: Final = 200
MAX_COMPARISONS: Final = 8

_OPERATORS: Final[dict[str, Callable[[VersionKey, VersionKey], bool]]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "!=": operator.ne,
    "=": operator.eq,
    "<": operator.lt,
    ">": operator.gt,
}
_COMPARISON: Final = re.compile(r"(>=|<=|!=|=|<|>)(.*)", re.DOTALL)


def version_key(text: str) -> VersionKey | None:
    """The sortable form of an app version, or None when `text` is not one (`1.2.3 (45)`, empty,
    longer than `MAX_VERSION_LENGTH`): an audience's version condition is then false."""
    if len(text) > MAX_VERSION_LENGTH:
        return None
    found = _VERSION.fullmatch(text)
    if found is None:
        return None
    numbers = [int(n) for n in found.group(1).split(".")]
    core = (*numbers, 0, 0, 0)[:4]
    core_key = (core[0], core[1], core[2], core[3])
    pre = found.group(2)
    if pre is None:
        return (core_key, 1, ())
    return (core_key, 0, tuple(_identifier(part) for part in pre.split(".")))


def _identifier(part: str) -> Identifier:
    # An empty identifier (`1.0-a..b`) passes §6's pattern; it sorts as the empty string does.
    return (0, int(part), "") if part.isdigit() else (1, 0, part)


class InvalidRange(ValueError):
    """A version range that cannot be read; the message says which part and why."""


@dataclass(frozen=True, slots=True)
class VersionRange:
    """A parsed range: every comparison must hold (a space is AND). `text` is the range as written
    (normalised to single spaces), what an API answers back."""

    text: str
    comparisons: tuple[tuple[Callable[[VersionKey, VersionKey], bool], VersionKey], ...]

    def admits(self, key: VersionKey | None) -> bool:
        """Whether a version (its `version_key`) is in the range; an unparsed version (None) never is."""
        if key is None:
            return False
        # A loop, not all(<generator>): no generator object per call on the gateway's hot path.
        for compare, bound in self.comparisons:  # noqa: SIM110
            if not compare(key, bound):
                return False
        return True


def parse_range(text: str) -> VersionRange:
    """Read a range such as `>=2.1.0 <3`: comparisons with `=`, `!=`, `<`, `<=`, `>`, `>=`, separated
    by spaces, all of which must hold (a space may also follow the operator: `>= 2.1.0`). A bare
    version needs `=`: whether `2.1` means exactly 2.1.0.0 or "any 2.1.x" is a guess we will not
    make. Raises `InvalidRange` for an empty range, an unknown operator, a part that is not a
    version, and a range no version can satisfy (`>=3 <2`)."""
    if not isinstance(text, str):
        raise InvalidRange('must be a string such as ">=2.1.0 <3"')
    if len(text) > MAX_RANGE_LENGTH:
        raise InvalidRange(f"at most {MAX_RANGE_LENGTH} characters")
    tokens = _tokens(text)
    if not tokens:
        raise InvalidRange('is empty; write comparisons such as ">=2.1.0 <3"')
    if len(tokens) > MAX_COMPARISONS:
        raise InvalidRange(f"at most {MAX_COMPARISONS} comparisons")
    comparisons: list[tuple[Callable[[VersionKey, VersionKey], bool], VersionKey]] = []
    for token in tokens:
        found = _COMPARISON.fullmatch(token)
        if found is None or found.group(2) == "":
            raise InvalidRange(
                f'"{token}" is not a comparison: write an operator (=, !=, <, <=, >, >=) and a version, e.g. ">=2.1.0"'
            )
        key = version_key(found.group(2))
        if key is None:
            raise InvalidRange(
                f'"{found.group(2)}" is not a version: up to four numbers with an optional -pre-release, '
                "e.g. 2.1, 2.1.0, v2.1.0-beta.1"
            )
        comparisons.append((_OPERATORS[found.group(1)], key))
    parsed = VersionRange(text=" ".join(tokens), comparisons=tuple(comparisons))
    if not _satisfiable(parsed):
        raise InvalidRange(f'no version satisfies "{parsed.text}"')
    return parsed


def _tokens(text: str) -> list[str]:
    """Whitespace-separated comparisons, an operator standing alone joined to the version after it."""
    tokens: list[str] = []
    pending = ""
    for word in text.split():
        if word in _OPERATORS:
            if pending:
                raise InvalidRange(f'"{pending}" is followed by another operator, not a version')
            pending = word
            continue
        tokens.append(pending + word)
        pending = ""
    if pending:
        raise InvalidRange(f'"{pending}" at the end has no version')
    return tokens


def _satisfiable(parsed: VersionRange) -> bool:
    """False when the range plainly admits nothing: an exact version it excludes itself, or a
    lower bound above (or, exclusive, at) its upper bound. Ranges empty only through pre-release
    corner cases (`>1.0.0 <1.0.0.1-0`) pass: they are harmless and never written on purpose."""
    exact = [key for compare, key in parsed.comparisons if compare is operator.eq]
    if exact:
        return parsed.admits(exact[0])
    lower = max((key for compare, key in parsed.comparisons if compare in (operator.ge, operator.gt)), default=None)
    upper = min((key for compare, key in parsed.comparisons if compare in (operator.le, operator.lt)), default=None)
    if lower is None or upper is None:
        return True
    if lower < upper:
        return True
    return lower == upper and parsed.admits(lower)
