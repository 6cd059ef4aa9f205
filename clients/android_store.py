"""android_store: Google Play Developer API (androidpublisher v3), the client both callers build.

Receipts and notifications (`api.receipts.android_store`) and the sync
(`orchestration.syncs.connectors.android_store`, through `PlayApi`: paced, retried, Google's
errors in the sync vocabulary) read purchases through this service; what a purchase resource
means is `transforms.purchases.android_store`, which stays pure.
"""

from __future__ import annotations

import email.utils
import http.client
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import google_auth_httplib2  # type: ignore[import-untyped]  # no type information shipped
import httplib2  # type: ignore[import-untyped]
from google.auth import exceptions as auth_exceptions
from google.oauth2 import service_account
from googleapiclient import discovery  # type: ignore[import-untyped]
from googleapiclient.errors import HttpError  # type: ignore[import-untyped]

from clients.http import Pacer
from clients.retry import RetryPolicy
from transforms.client_errors import AuthFailed, ProviderFailed, Unavailable, error_for
from transforms.integrations.errors import MAX_PROVIDER_TEXT, ErrorCode, truncate

SCOPE = "https://www.googleapis.com/auth/androidpublisher"
PAGE_SIZE = 1000  # voidedpurchases.list's maximum
NOT_FOUND = (400, 404, 410)  # a token Google does not know (for this app), or no longer does


def service_for(info: Mapping[str, Any], *, api_url: str, timeout: float) -> tuple[service_account.Credentials, Any]:
    """The app's service-account credentials and the androidpublisher v3 service built on them.

    Construction only (the discovery document ships with google-api-python-client, so nothing
    is fetched; the OAuth token is requested on the first call). Each call should then run on
    its own `AuthorizedHttp` (`authorized_http`): httplib2 objects are not thread-safe. A key
    file that is not a usable service-account key raises `ValueError`."""
    try:
        credentials = service_account.Credentials.from_service_account_info(dict(info), scopes=[SCOPE])
    except KeyError as e:
        raise ValueError(f"the key file lacks {e}") from None
    service = discovery.build(
        "androidpublisher",
        "v3",
        http=authorized_http(credentials, timeout),
        client_options={"api_endpoint": api_url},
        static_discovery=True,
        cache_discovery=False,
    )
    return credentials, service


def authorized_http(credentials: service_account.Credentials, timeout: float) -> Any:
    """A fresh authorized transport for one call, `timeout` seconds on its socket."""
    return google_auth_httplib2.AuthorizedHttp(credentials, http=httplib2.Http(timeout=timeout))


def retry_after(resp: Mapping[str, Any]) -> float | None:
    """`Retry-After` (delay-seconds or an HTTP-date) from httplib2's lower-cased headers."""
    value = str(resp.get("retry-after") or "").strip()
    if not value:
        return None
    try:
        number = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        when = when if when.tzinfo is not None else when.replace(tzinfo=UTC)
        return max(0.0, (when - datetime.now(UTC)).total_seconds())
    return max(0.0, number) if math.isfinite(number) else None


def google_words(error: HttpError) -> str:
    """Google's error message (`error.message` of its JSON error body)."""
    try:
        reason = error.reason
    except Exception:  # the client parses the body lazily; a proxy's page has no message
        reason = None
    return truncate(str(reason or error.resp.reason or error.resp.status), MAX_PROVIDER_TEXT)


@dataclass
class PurchasesApi:
    """One app's Play Developer API for the gateway (receipts, notifications): the service built
    once, credentials refreshed as needed, no retries (the gateway's answer is the retry).

    400/404/410 (a token Google does not know for this app, or one past its 60 days after
    expiry) is `NotFound`; a refused service account `AuthFailed`; no answer in time
    `Unavailable(timed_out=True)`; a refused connection, a 5xx or a 429 `Unavailable` or
    `ProviderFailed`."""

    package: str
    service: Any
    credentials: service_account.Credentials
    timeout: float

    def _http(self) -> Any:
        return authorized_http(self.credentials, self.timeout)

    def call(self, request: Any) -> dict[str, Any]:
        """Execute one API request: the store's answer, or the error it maps to."""
        try:
            answer: dict[str, Any] = request.execute(http=self._http(), num_retries=0)
        except HttpError as e:
            status = int(e.resp.status)
            if status in NOT_FOUND:
                raise NotFound(e.reason or str(status)) from None
            if status in (401, 403):
                raise AuthFailed(
                    f"Google Play refused the app's service account ({status}): grant it access to the app in "
                    "Play Console (Users and permissions)",
                    status=status,
                ) from None
            raise ProviderFailed(f"Google Play answered {status}", status=status) from None
        except TimeoutError:  # socket.timeout
            raise Unavailable(f"Google Play did not answer within {self.timeout:g} s", timed_out=True) from None
        except auth_exceptions.RefreshError as e:
            raise AuthFailed(f"Google's token endpoint refused the app's service account: {e}") from None
        except auth_exceptions.TransportError as e:
            if isinstance(e.__cause__ or e.__context__, TimeoutError):
                raise Unavailable(f"Google did not answer within {self.timeout:g} s", timed_out=True) from None
            raise Unavailable(f"Google is unreachable: {e}") from None
        except (OSError, httplib2.HttpLib2Error, http.client.HTTPException) as e:
            raise Unavailable(f"Google Play is unreachable: {type(e).__name__}") from None
        return answer

    def subscription(self, token: str) -> dict[str, Any]:
        purchases = self.service.purchases().subscriptionsv2()
        return self.call(purchases.get(packageName=self.package, token=token))

    def product(self, product_id: str, token: str) -> dict[str, Any]:
        purchases = self.service.purchases().products()
        return self.call(purchases.get(packageName=self.package, productId=product_id, token=token))

    def voided_page(self, *, start: datetime, page: str | None) -> dict[str, Any]:
        """One page of `voidedpurchases.list` since `start`: subscriptions too (`type=1`), and
        quantity-based partial refunds (which a notification may announce as well)."""
        params: dict[str, Any] = {"packageName": self.package, "type": 1, "maxResults": PAGE_SIZE,
                                  "includeQuantityBasedPartialRefund": True}  # fmt: skip
        if page is None:
            params["startTime"] = str(int(start.timestamp() * 1000))
        else:
            params["token"] = page
        try:
            return self.call(self.service.purchases().voidedpurchases().list(**params))
        except NotFound as e:  # a 400 or 404 here is about the request, not a token
            raise ProviderFailed(f"Google Play refused listing the app's voided purchases: {e}") from None

    def acknowledge_subscription(self, product_id: str, token: str) -> None:
        purchases = self.service.purchases().subscriptions()
        self.call(purchases.acknowledge(packageName=self.package, subscriptionId=product_id, token=token, body={}))

    def acknowledge_product(self, product_id: str, token: str) -> None:
        purchases = self.service.purchases().products()
        self.call(purchases.acknowledge(packageName=self.package, productId=product_id, token=token, body={}))


class NotFound(Exception):
    """Google knows no such purchase (for this app), or no longer does; the message is Google's."""


@dataclass(kw_only=True)
class PlayApi(RetryPolicy):
    """One app's Play Developer API with the sync's pacing and FloKit's retry policy
    (`clients.retry`: Google's `Retry-After` on a 429, else the doubling backoff)."""

    package: str
    credentials: service_account.Credentials
    service: Any
    pacer: Pacer
    timeout_s: float = 60.0
    log: Callable[[str], None] = lambda _line: None
    calls: int = 0
    rate_limited: int = 0

    def call(self, request: Any, *, what: str) -> dict[str, Any]:
        """Execute `request` (retried by the rules above): Google's answer, `NotFound`, or `ClientError`."""
        wait = 0.0
        for attempt in range(1, self.attempts + 1):
            if wait:
                self.log(f"Google Play: waiting {wait:.2f} s before retrying {what} (attempt {attempt})")
                self.sleep(wait)
            self.pacer.wait()
            self.calls += 1
            last = attempt == self.attempts
            try:
                answer = request.execute(http=authorized_http(self.credentials, self.timeout_s), num_retries=0)
            except HttpError as e:
                status = int(e.resp.status)
                words = google_words(e)
                if status in NOT_FOUND:
                    raise NotFound(words) from None
                if status in (401, 403):
                    raise error_for(
                        "auth",
                        f"{what}: Google Play answered {status}: {words} (the service account needs access to the "
                        "app in Play Console, with the permissions 'View app information' and 'View financial "
                        "data')",
                        status=status,
                    ) from None
                if status == 429:
                    self.rate_limited += 1
                    asked = retry_after(e.resp)
                    if asked is not None:
                        self.pacer.push_back(asked)
                    then = self.next_wait(attempt, asked)
                    if then is None:  # the last attempt, or Google asked for longer than a run sits out
                        raise error_for(
                            "rate_limited",
                            f"{what}: Google Play answered 429 after {attempt} attempt(s): {words}",
                            status=429,
                        ) from None
                    wait = then
                    continue
                if status >= 500 and not last:
                    wait = self.backoff(attempt)
                    continue
                code: ErrorCode = "provider_error" if status >= 500 else "config"
                raise error_for(
                    code, f"{what}: Google Play answered {status} after {attempt} attempt(s): {words}", status=status
                ) from None
            except auth_exceptions.RefreshError as e:
                raise error_for(
                    "auth", f"{what}: Google's token endpoint refused the app's service account key: {e}"
                ) from None
            except (auth_exceptions.TransportError, OSError, httplib2.HttpLib2Error, http.client.HTTPException) as e:
                if last:
                    raise error_for(
                        "provider_error", f"{what}: Google Play did not answer ({type(e).__name__}: {e})"
                    ) from None
                wait = self.backoff(attempt)
                continue
            if not isinstance(answer, dict):
                raise error_for("bad_response", f"{what}: not a JSON object")
            return answer
        raise AssertionError("unreachable: the last attempt returns or raises")

    def voided_pages(self, start: datetime, *, page_size: int = PAGE_SIZE) -> Iterator[list[dict[str, Any]]]:
        """`voidedpurchases.list` from `start` (subscriptions too), page by page."""
        voided = self.service.purchases().voidedpurchases()
        token: str | None = None
        seen: set[str] = set()
        page = 0
        while True:
            page += 1
            params: dict[str, Any] = {"packageName": self.package, "type": 1, "maxResults": page_size}
            if token is None:
                params["startTime"] = str(int(start.timestamp() * 1000))
            else:
                params["token"] = token
            what = f"listing the voided purchases of {self.package} (page {page})"
            try:
                body = self.call(voided.list(**params), what=what)
            except NotFound as e:
                raise error_for("config", f"{what}: Google Play refused the request: {e}") from None
            items = body.get("voidedPurchases", [])
            if not isinstance(items, list):
                raise error_for("bad_response", f"{what}: voidedPurchases is not a list")
            yield [i for i in items if isinstance(i, dict)]
            paging = body.get("tokenPagination")
            token = paging.get("nextPageToken") if isinstance(paging, Mapping) else None
            if not token:
                return
            if not isinstance(token, str) or token in seen:
                raise error_for("bad_response", f"{what}: nextPageToken {token!r} does not move on")
            seen.add(token)

    def subscription(self, token: str) -> dict[str, Any] | None:
        """`subscriptionsv2.get`, or None when Google knows no subscription with this token."""
        request = self.service.purchases().subscriptionsv2().get(packageName=self.package, token=token)
        try:
            return self.call(request, what=f"reading a subscription of {self.package}")
        except NotFound:
            return None
