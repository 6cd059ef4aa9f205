"""The dashboard's sign-in rules: how long a login link and a session live, what an operator is.

Pure values and checks, shared by the CLI that mints a link, the repository that stores it and the
views that honour it, so the three never disagree on a lifetime or on what counts as an email.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Final

# A login link is pasted from a terminal into a browser within minutes (design note §2: Jupyter's
# and Svix's links are short-lived too); 15 minutes is the default, a day the most it may be.
DEFAULT_LINK_TTL: Final = timedelta(minutes=15)
MIN_LINK_TTL: Final = timedelta(minutes=1)
MAX_LINK_TTL: Final = timedelta(hours=24)
# A session ends after 12 h without a request, and 7 days after sign-in whatever happens
# (design note §2; Metabase's default is 14 days, a dashboard that shows secrets keeps it shorter).
SESSION_IDLE: Final = timedelta(hours=12)
SESSION_ABSOLUTE: Final = timedelta(days=7)
# `last_seen_at` is written at most this often, so a page view is not a write every time; the idle
# expiry is exact to within this.
SESSION_TOUCH_EVERY: Final = timedelta(minutes=5)
# RFC 5321's limit on a forward path; an operator's address is shown and stored as the actor.
EMAIL_MAX: Final = 254

_TTL = re.compile(r"(\d+)([smhd])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
# One "@", no spaces, a domain with at least one dot or the single label "localhost": what a
# person types as an address, not RFC 5322's full grammar (quoted local parts and the like).
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_EMAIL = re.compile(rf"[^@\s\"<>(),;:\\]+@(?:localhost|(?:{_LABEL}\.)+[A-Za-z]{{2,63}})")


class InvalidValue(ValueError):
    """A TTL or an email that cannot be used; the message says what is expected."""


def parse_ttl(raw: str) -> timedelta:
    """`90s`, `15m`, `2h`, `1d`: a login link's lifetime, from 1 minute to 24 hours."""
    match = _TTL.fullmatch(raw.strip())
    if match is None:
        raise InvalidValue(f"TTL must be a number and a unit (s, m, h or d), such as 15m or 2h; got {raw!r}")
    ttl = timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    if not MIN_LINK_TTL <= ttl <= MAX_LINK_TTL:
        raise InvalidValue(f"TTL must be between 1m and 24h; got {raw!r}")
    return ttl


def operator_email(raw: str) -> str:
    """The operator's address as stored and shown (surrounding spaces dropped), or InvalidValue."""
    email = raw.strip()
    if len(email) > EMAIL_MAX or _EMAIL.fullmatch(email) is None:
        raise InvalidValue(f"the operator must be an email address such as maya@example.com; got {raw!r}")
    return email
