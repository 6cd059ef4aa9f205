"""ios_store_connect: Apple's App Store Server API, through Apple's own library (`app-store-server-library`).

Apple's library (`AppStoreServerAPIClient`: the ES256 JWT, the request, the decoding) raises
`APIException(http_status_code, api_error)` and does not retry; `AppStoreClient.call` does: 429
(`RateLimitExceededError`) and 5xx are retried with a doubling wait within a budget (Apple's
library exposes no response header, so no `Retry-After` can be read), then `rate_limited` /
`provider_error`; 401 is `auth`. The base URL of a proxy or a test is set through the library's
private `_base_url`, the only way it offers (design note §1.7, §5). The reconciliation sync is
`orchestration.syncs.connectors.ios_store_connect`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import requests
from appstoreserverlibrary.api_client import APIError, APIException, AppStoreServerAPIClient
from appstoreserverlibrary.models.Environment import Environment

from clients.http import guarded_session
from clients.retry import RetryPolicy
from transforms.client_errors import error_for
from transforms.integrations.errors import MAX_PROVIDER_TEXT, code_for_status, truncate
from transforms.integrations.kinds import kind_of

TYPE = "ios_store_connect"
T = TypeVar("T")
Log = Callable[[str], None]


class TokenExpired(Exception):
    """Apple no longer accepts the pagination token (`PaginationTokenExpiredError`)."""


@dataclass(kw_only=True)
class AppStoreClient(RetryPolicy):
    """An In-App Purchase key's access to the App Store Server API, with FloKit's retry policy
    (`clients.retry`; `attempts` counts tries of one call on 429, 5xx, a connection failure)."""

    issuer_id: str
    key_id: str
    private_key: str
    base_url: str
    max_backoff_s: float = 60.0  # the App Store sync's own ceiling, longer than the policy's default
    calls: int = 0
    rate_limited: int = 0

    def __repr__(self) -> str:  # never the key
        return f"AppStoreClient(issuer_id={self.issuer_id!r}, key_id={self.key_id!r})"

    def api_for(self, bundle_id: str, environment: str) -> AppStoreServerAPIClient:
        """Apple's client for one app (bundle id, `Production` or `Sandbox`); `config` when the key
        is not an In-App Purchase key."""
        try:
            client = GuardedAppStoreClient(
                self.private_key.encode(), self.key_id, self.issuer_id, bundle_id, Environment(environment)
            )
        except (ValueError, TypeError) as e:
            raise error_for("config", f"private_key is not an In-App Purchase key (.p8, PEM): {e}") from None
        if self.base_url.rstrip("/") != kind_of(TYPE).default_base_url:
            client._base_url = self.base_url.rstrip("/")  # a proxy or a test; else the library's own per environment
        return client

    def call(self, what: str, request: Callable[[], T], log: Log) -> T:
        """One library call, retried on 429, 5xx and connection failures; failures classified."""
        for attempt in range(1, self.attempts + 1):
            last = attempt == self.attempts
            self.calls += 1
            try:
                return request()
            except APIException as e:
                status = e.http_status_code
                text = apple_error(e)
                if e.raw_api_error == APIError.PAGINATION_TOKEN_EXPIRED:
                    raise TokenExpired(text) from None
                if status == 429 or e.raw_api_error == APIError.RATE_LIMIT_EXCEEDED:
                    self.rate_limited += 1
                    if last:
                        raise error_for(
                            "rate_limited", f"{what}: HTTP 429 after {attempt} attempt(s): {text}", status=429
                        ) from None
                elif status >= 500:
                    if last:
                        raise error_for(
                            "provider_error", f"{what}: HTTP {status} after {attempt} attempt(s): {text}", status=status
                        ) from None
                else:
                    raise error_for(code_for_status(status), f"{what}: HTTP {status}: {text}", status=status) from None
                reason = f"HTTP {status}"
            except (requests.ConnectionError, requests.Timeout) as e:
                if last:
                    raise error_for("provider_error", f"{what}: {type(e).__name__}: {e}") from None
                reason = type(e).__name__
            except (KeyError, TypeError, ValueError) as e:  # a 2xx body the library could not read
                raise error_for("bad_response", f"{what}: not a notification history: {e}") from None
            wait = self.backoff(attempt)  # not the last attempt: that one raised above
            log(f"App Store: {reason} {what}; waiting {wait:.2f} s before attempt {attempt + 1}")
            self.sleep(wait)
        raise AssertionError("unreachable: the last attempt returns or raises")


class GuardedAppStoreClient(AppStoreServerAPIClient):
    """Apple's client whose requests go through a session under the egress policy and follow no
    redirect (clients/http.py), instead of the library's module-level `requests`."""

    def _execute_request(
        self,
        method: str,
        url: str,
        params: dict[str, str | list[str]],
        headers: dict[str, str],
        json: dict[str, Any] | None,
        data: bytes | None,
    ) -> requests.Response:
        session = getattr(self, "_guarded", None)
        if session is None:
            session = self._guarded = guarded_session()
        return session.request(method, url, params=params, headers=headers, json=json, data=data, timeout=30)


def apple_error(e: APIException) -> str:
    """Apple's error object as the operator reads it: its message and errorCode."""
    if e.error_message or e.raw_api_error is not None:
        return f"{truncate(e.error_message or 'no message', MAX_PROVIDER_TEXT)} (errorCode {e.raw_api_error!r:.20})"
    return "no error body"
