"""Why a call to an ad platform failed, in the integrations' error vocabulary.

Two families, as for the integrations (`transforms.integrations.errors`): the platform *refused*
the credentials (`AuthError`, code `auth`): no retry fixes it, the account goes to `error` and
the workspace hears of it (`integration.error`); or it was *unavailable* for now (`RateLimited`,
`ProviderError` with `transient`): the call may be retried after a wait, and when the retries run
out only that sync (or that execution attempt) fails. A `ProviderError` that is not transient is
the platform rejecting the request itself (an unknown object, an invalid value): retrying the
same request cannot help, and nothing about the credentials is known.
"""

from __future__ import annotations

from typing import Literal

from transforms.integrations.errors import truncate

ErrorCode = Literal["auth", "config", "rate_limited", "provider_error", "bad_response"]


class PlatformError(Exception):
    code: ErrorCode = "provider_error"

    def __init__(self, message: str, *, status: int | None = None, platform_code: str | None = None) -> None:
        super().__init__(truncate(message))
        self.message = truncate(message)
        self.status = status
        self.platform_code = platform_code  # the platform's own error code (Meta's 190, Apple's messageCode)

    @property
    def refused(self) -> bool:
        return self.code == "auth"

    @property
    def transient(self) -> bool:
        return False


class AuthError(PlatformError):
    """The platform refused the credentials (Meta 190/102, Apple 401/403 or a refused token)."""

    code: ErrorCode = "auth"


class RateLimited(PlatformError):
    """The platform asked for a pause; `retry_after` is its documented wait in seconds, if it said."""

    code: ErrorCode = "rate_limited"

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None = None,
        status: int | None = None,
        platform_code: str | None = None,
    ) -> None:
        super().__init__(message, status=status, platform_code=platform_code)
        self.retry_after = retry_after

    @property
    def transient(self) -> bool:
        return True


class ProviderError(PlatformError):
    """Anything else: `transient` for 5xx, timeouts and refused connections; else the request
    itself was rejected (code `config`) or the answer could not be read (`bad_response`)."""

    def __init__(
        self,
        message: str,
        *,
        transient: bool = False,
        code: ErrorCode | None = None,
        status: int | None = None,
        platform_code: str | None = None,
    ) -> None:
        super().__init__(message, status=status, platform_code=platform_code)
        self._transient = transient
        if code is not None:
            self.code = code

    @property
    def transient(self) -> bool:
        return self._transient
