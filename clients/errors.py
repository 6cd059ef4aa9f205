"""all vendors: what a client raises when a third party's call fails, one hierarchy for every client.

Six kinds, each with the stored failure code it maps to (`code`, the vocabulary of
`transforms.integrations.errors.ErrorCode`, which sync rows, ad accounts and webhook payloads
keep): the caller maps a `ClientError` to its own answer in one place (the stored code, an HTTP
status of the gateway) instead of knowing each vendor's exceptions. `Unavailable` (the vendor
could not be reached, or not in time) is stored as `provider_error`, as a 5xx is.
"""

from __future__ import annotations

from typing import ClassVar

from transforms.integrations.errors import ErrorCode


class ClientError(Exception):
    """A third party's call failed; `message` is what an operator may read (the vendor's own
    words where it sent any, never a request's secrets)."""

    code: ClassVar[ErrorCode] = "provider_error"

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.retry_after = retry_after  # seconds the vendor asked us to wait, when it said


class AuthFailed(ClientError):
    """The vendor refused the credentials."""

    code: ClassVar[ErrorCode] = "auth"


class ConfigRefused(ClientError):
    """The vendor (or our egress policy) refused the configuration: an unknown id, an address."""

    code: ClassVar[ErrorCode] = "config"


class RateLimited(ClientError):
    """The vendor asked for a pause longer than the retry budget."""

    code: ClassVar[ErrorCode] = "rate_limited"


class ProviderFailed(ClientError):
    """The vendor answered with an error of its own (a 5xx, a refusal that is not ours to fix)."""

    code: ClassVar[ErrorCode] = "provider_error"


class BadResponse(ClientError):
    """The vendor's answer could not be read (not JSON, not the documented shape)."""

    code: ClassVar[ErrorCode] = "bad_response"


class Unavailable(ClientError):
    """The vendor could not be reached, or did not answer in time (`timed_out`)."""

    code: ClassVar[ErrorCode] = "provider_error"

    def __init__(self, message: str, *, timed_out: bool = False, status: int | None = None) -> None:
        super().__init__(message, status=status)
        self.timed_out = timed_out
