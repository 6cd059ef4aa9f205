"""Why a sync failed, in the vocabulary of `integration_syncs.error_code` (raised as `transforms.client_errors`).

Two families, because they call for different reactions (ARCHITECTURE, integration status):
the provider *refused* the credentials or the configuration (`auth`, `config`): nobody's retry
will fix it, so the integration goes to `error` and the workspace hears of it once
(`integration.error`); or the provider was *unavailable* for now (`rate_limited` beyond the
retry budget, `provider_error` for 5xx/timeouts/refused connections, `bad_response` for an
answer we could not read): the sync row fails, the integration stays `connected`, the next
scheduled sync tries again.
"""

from __future__ import annotations

from typing import Literal

ErrorCode = Literal["auth", "config", "rate_limited", "provider_error", "bad_response"]
ERROR_CODES: tuple[ErrorCode, ...] = ("auth", "config", "rate_limited", "provider_error", "bad_response")
REFUSALS: frozenset[ErrorCode] = frozenset({"auth", "config"})
# The provider's own text is kept, cut to this many characters (PostHog cuts at 1000 too:
# design/integrations.md §4.1): enough for any real error message, bounded for a bad proxy page.
MAX_ERROR_TEXT = 1000


def code_for_status(status: int) -> ErrorCode:
    """The error code of an HTTP status a provider answered with (after any retries).

    401/403: the credentials; 400/404/422: the configuration (an unknown app or project id is a
    404 at every provider here); 429: the rate limit; anything else: the provider's fault."""
    if status in (401, 403):
        return "auth"
    if status in (400, 404, 422):
        return "config"
    if status == 429:
        return "rate_limited"
    return "provider_error"


def truncate(text: str, limit: int = MAX_ERROR_TEXT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# What a failure keeps of the answer's body: a provider's error message (the longest real ones
# are about 150 characters), never more. The address a sync calls is the operator's to set, and
# the answer reaches the sync history, which read-only keys and the dashboard show: an answer
# from an address that is not a provider's must not carry a page of it there.
MAX_PROVIDER_TEXT = 200
# The status line's reason phrase, said when the body holds no message ("Internal Server Error").
MAX_REASON_TEXT = 40
_MESSAGE_KEYS = ("message", "error_description", "error", "detail", "errors")


def provider_text(body: object, reason: str | None) -> str:
    """A short, provider-shaped message for an error answer.

    `body` is the answer parsed as JSON (None when it was not JSON): its message field (a string
    under `message`, `error_description`, `error`, `detail`, or the `message` of an object or of
    the first object of a list there), cut to MAX_PROVIDER_TEXT characters. Anything else, and any
    body that is not JSON, is not repeated: only the reason phrase is, cut short."""
    message = _message(body, depth=0)
    if message:
        return truncate(message, MAX_PROVIDER_TEXT)
    return truncate(reason or "", MAX_REASON_TEXT) or "no message"


def _message(value: object, *, depth: int) -> str | None:
    if isinstance(value, str):
        return value if depth > 0 else None  # a bare JSON string is a body, not a field
    if depth > 2:
        return None
    if isinstance(value, list):
        return _message(value[0], depth=depth + 1) if value else None
    if isinstance(value, dict):
        for key in _MESSAGE_KEYS:
            found = _message(value.get(key), depth=depth + 1)
            if found:
                return found
    return None
