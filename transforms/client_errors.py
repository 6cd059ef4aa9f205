"""all vendors: what a third party's failed call is, one hierarchy for every client and every caller.

Six kinds, each with the stored failure code it maps to (`code`, the vocabulary of
`transforms.integrations.errors.ErrorCode` that sync rows, ad accounts and webhook payloads keep).
It lives in the pure room, not in `clients/`, because the callers that record a failure
(orchestration's sync and executor, the CLI's connect check, warehouse code keeping the code) must
name it and `transforms` may not import `clients`.

Two families call for different reactions: the vendor *refused* the credentials or the
configuration (`refused`: `AuthFailed`, `ConfigRefused`): nobody's retry fixes it, the integration
or ad account goes to `error` and the workspace hears of it once; or the vendor was unavailable
for now (`transient`: `RateLimited`, `Unavailable`, a 5xx `ProviderFailed`): the call may be
retried after a wait, and when the retries run out only that sync (or attempt) fails.
`Unavailable` (not reached, or not in time) is stored as `provider_error`, as a 5xx is.
"""

from __future__ import annotations

from typing import ClassVar

from transforms.integrations.errors import ERROR_CODES, REFUSALS, ErrorCode, truncate


class ClientError(Exception):
    """A third party's call failed. `message` is what an operator may read (the vendor's own words
    where it sent any, never a request's secrets), whitespace folded and cut to
    `MAX_ERROR_TEXT`; `retry_after` the seconds the vendor asked us to wait, when it said;
    `platform_code` the vendor's own error code (Meta's 190, Apple's messageCode)."""

    code: ClassVar[ErrorCode] = "provider_error"
    transient_by_default: ClassVar[bool] = False

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        platform_code: str | None = None,
        transient: bool | None = None,
    ) -> None:
        self.message = truncate(message)
        super().__init__(self.message)
        self.status = status
        self.retry_after = retry_after
        self.platform_code = platform_code
        self._transient = self.transient_by_default if transient is None else transient

    @property
    def refused(self) -> bool:
        """The vendor refused the credentials or the config: the integration (account) is in `error`."""
        return self.code in REFUSALS

    @property
    def transient(self) -> bool:
        """Trying the same call again later may succeed (a pause asked for, a 5xx, no answer)."""
        return self._transient


class AuthFailed(ClientError):
    """The vendor refused the credentials (a 401/403, Meta's 190/102, a refused token)."""

    code: ClassVar[ErrorCode] = "auth"


class ConfigRefused(ClientError):
    """The vendor (or our egress policy) refused the configuration or the request itself: an
    unknown id, an invalid value, an address; retrying the same request cannot help."""

    code: ClassVar[ErrorCode] = "config"


class RateLimited(ClientError):
    """The vendor asked for a pause (`retry_after`, when it said how long)."""

    code: ClassVar[ErrorCode] = "rate_limited"
    transient_by_default: ClassVar[bool] = True


class ProviderFailed(ClientError):
    """The vendor answered with an error of its own (a 5xx: `transient`, or a refusal that is not
    ours to fix)."""

    code: ClassVar[ErrorCode] = "provider_error"


class BadResponse(ClientError):
    """The vendor's answer could not be read (not JSON, not the documented shape)."""

    code: ClassVar[ErrorCode] = "bad_response"


class Unavailable(ClientError):
    """The vendor could not be reached, or did not answer in time (`timed_out`)."""

    code: ClassVar[ErrorCode] = "provider_error"
    transient_by_default: ClassVar[bool] = True

    def __init__(self, message: str, *, timed_out: bool = False, status: int | None = None) -> None:
        super().__init__(message, status=status)
        self.timed_out = timed_out


_BY_CODE: dict[ErrorCode, type[ClientError]] = {
    "auth": AuthFailed,
    "config": ConfigRefused,
    "rate_limited": RateLimited,
    "provider_error": ProviderFailed,
    "bad_response": BadResponse,
}


def error_for(code: ErrorCode, message: str, *, status: int | None = None) -> ClientError:
    """The hierarchy's error for a stored failure code, for callers that decide the code from an
    answer (`code_for_status`) rather than knowing the kind up front."""
    if code not in ERROR_CODES:
        raise ValueError(f"unknown failure code {code!r}")
    return _BY_CODE[code](message, status=status)
