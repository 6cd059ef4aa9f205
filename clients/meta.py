"""meta: Meta Marketing API through Meta's own SDK (`facebook-business`), an ad platform client.

The SDK builds every URL from its session's `GRAPH` (facebook_business/api.py `call`: `"/".join((
url_override or self._session.GRAPH, api_version, path))`), so `base_url` is applied by setting
the session's `GRAPH`; the default is Meta's own `https://graph.facebook.com`. `crash_log=False`
is mandatory: the SDK's default crash reporter installs a `sys.excepthook` that POSTs crash
reports to Meta through a fresh session (design note §3). Each client owns its API object and
passes it to every SDK object (`api=`), so two accounts in one process never share credentials
through the SDK's process-wide default.

Objects: campaigns, ad sets and ads (`/act_…/campaigns|adsets|ads`), every page through the SDK's
`Cursor` (`paging.cursors.after` while `paging.next` is present). `daily_budget` is an integer in
Meta's offset unit (`transforms.adaccounts.money`); `0` or absent means the object has no daily
budget of its own (a campaign without campaign budget, an ad set under one), kept as None.
Writes are `POST /{id}` with `daily_budget` or `status` (ACTIVE / PAUSED).

Errors (Marketing API "Rate Limiting" and "Error codes"): 190 (invalid or expired token) and 102
(session) are the credentials → `AuthError`; 4, 17, 32, 613, 80000-80014 (BUC throttling; 17 /
2446079 "User request limit reached", 613 / 1487742 "too many calls from this ad-account", 80004
the ads-management use case) and HTTP 429 → `RateLimited`, waiting what Meta's headers say:
`X-Business-Use-Case-Usage` `estimated_time_to_regain_access` (minutes) and
`X-Ad-Account-Usage` `reset_time_duration` (seconds), else a doubling backoff; 5xx, Meta's
`is_transient` errors and network failures → a transient `ProviderError`; anything else → a
`ProviderError` that is not retried. Messages carry Meta's own text, never the request (the SDK's
`str(error)` prints the request's parameters).

One SDK quirk is guarded: `FacebookResponse.is_success` takes any non-empty body without an
`error` key for success, whatever the HTTP status, so a bare `429 Too Many Requests` (a proxy's,
or a load balancer's) would be parsed as the object. A response hook on the SDK's `requests`
session classifies an HTTP error whose body is not Meta's error object before the SDK sees it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import requests
from facebook_business.adobjects.ad import Ad
from facebook_business.adobjects.adaccount import AdAccount
from facebook_business.adobjects.adset import AdSet
from facebook_business.adobjects.campaign import Campaign
from facebook_business.api import FacebookAdsApi
from facebook_business.exceptions import FacebookError, FacebookRequestError

from clients.ad_platform import LiveStatus, Retrier
from clients.egress import Egress
from clients.http import guard
from transforms.adaccounts.entities import AccountInfo, PlatformEntity
from transforms.adaccounts.errors import AuthError, PlatformError, ProviderError, RateLimited
from transforms.adaccounts.kinds import ValidConfig
from transforms.adaccounts.money import from_meta, to_meta
from transforms.integrations.errors import MAX_PROVIDER_TEXT, provider_text, truncate
from transforms.webhooks.urls import InvalidUrl

AUTH_CODES = frozenset({102, 190})
RATE_CODES = frozenset({4, 17, 32, 613, *range(80000, 80015)})
PAGE_SIZE = 200
FIELDS = {
    "campaign": ["id", "name", "status", "daily_budget", "updated_time"],
    "ad_set": ["id", "name", "status", "daily_budget", "updated_time", "campaign_id"],
    "ad": ["id", "name", "status", "updated_time", "adset_id"],
}
PARENT = {"campaign": None, "ad_set": "campaign_id", "ad": "adset_id"}
STATUSES: dict[LiveStatus, str] = {"active": "ACTIVE", "paused": "PAUSED"}
_CLASSES: dict[str, type[Any]] = {"campaign": Campaign, "ad_set": AdSet, "ad": Ad}


def wait_from_headers(headers: Mapping[str, str]) -> float | None:
    """The longest wait Meta's usage headers announce, in seconds (None when they say nothing)."""
    waits: list[float] = []
    lowered = {k.lower(): v for k, v in headers.items()}
    try:
        buc = json.loads(lowered.get("x-business-use-case-usage") or "{}")
        for usages in buc.values() if isinstance(buc, dict) else ():
            for usage in usages if isinstance(usages, list) else ():
                minutes = usage.get("estimated_time_to_regain_access") if isinstance(usage, dict) else None
                if isinstance(minutes, int | float) and minutes > 0:
                    waits.append(60.0 * minutes)
        account = json.loads(lowered.get("x-ad-account-usage") or "{}")
        seconds = account.get("reset_time_duration") if isinstance(account, dict) else None
        if isinstance(seconds, int | float) and seconds > 0:
            waits.append(float(seconds))
    except ValueError:
        return None
    retry_after = lowered.get("retry-after", "").strip()
    if retry_after.isdigit():
        waits.append(float(retry_after))
    return max(waits) if waits else None


def classify(error: FacebookRequestError) -> PlatformError:
    code = error.api_error_code()
    status = error.http_status()
    message = truncate(error.api_error_message() or "", MAX_PROVIDER_TEXT) or f"HTTP {status}"
    text = f"Meta: {message}" + (
        f" (code {code}" + (f"/{error.api_error_subcode()})" if error.api_error_subcode() else ")") if code else ""
    )
    platform_code = str(code) if code is not None else None
    if code in AUTH_CODES:
        return AuthError(text, status=status, platform_code=platform_code)
    if code in RATE_CODES or status == 429:
        return RateLimited(
            text, retry_after=wait_from_headers(error.http_headers() or {}), status=status, platform_code=platform_code
        )
    transient = (isinstance(status, int) and status >= 500) or bool(error.api_transient_error())
    return ProviderError(
        text, transient=transient, code=None if transient else "config", status=status, platform_code=platform_code
    )


def _time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S%z")
    except ValueError:
        return None


def guard_non_json_errors(response: requests.Response, *_args: Any, **_kwargs: Any) -> requests.Response:
    """A `requests` response hook: an HTTP error without Meta's JSON error body is classified here,
    a redirect too (it is not followed: clients/http.py `guard`)."""
    if response.status_code < 300 or response.status_code == 304:
        return response
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and "error" in body:
        return response  # Meta's own error: the SDK raises FacebookRequestError, `classify` maps it
    status = response.status_code
    text = f"Meta: HTTP {status}: {provider_text(body, response.reason)}"
    if status == 429:
        raise RateLimited(text, retry_after=wait_from_headers(response.headers), status=status)
    raise ProviderError(text, transient=status >= 500, code=None if status >= 500 else "config", status=status)


class MetaClient:
    platform = "meta"

    def __init__(
        self,
        config: ValidConfig,
        *,
        egress: Egress | None = None,
        retrier: Retrier | None = None,
        timeout: tuple[float, float] = (5.0, 60.0),
    ) -> None:
        self.account_id: str = config.get("ad_account_id")
        self.api = FacebookAdsApi.init(
            access_token=config.get("access_token"),
            api_version=config.get("api_version"),
            timeout=timeout,
            crash_log=False,
        )
        # The SDK reads GRAPH from the session each call; an instance attribute overrides the
        # class default for this client's session only.
        self.api._session.GRAPH = config.get("base_url").rstrip("/")
        guard(self.api._session.requests, egress)  # the egress policy's connections, no redirects
        self.api._session.requests.hooks["response"].append(guard_non_json_errors)
        self.retry = retrier or Retrier()
        self._currency: str | None = None

    def _call(self, what: str, call: Any) -> Any:
        def attempt() -> Any:
            try:
                return call()
            except FacebookRequestError as error:
                raise classify(error) from None
            except (requests.ConnectionError, requests.Timeout) as error:
                raise ProviderError(f"Meta: {type(error).__name__}: {error}", transient=True) from None
            except InvalidUrl as error:  # the egress policy refused the address (clients/egress.py)
                raise ProviderError(f"Meta: {error}", code="config") from None
            except FacebookError as error:
                raise ProviderError(f"Meta: {error}", code="bad_response") from None

        return self.retry(what, attempt)

    def account(self) -> AccountInfo:
        node = self._call(
            "read the ad account",
            lambda: AdAccount(self.account_id, api=self.api).api_get(fields=["account_id", "name", "currency"]),
        )
        self._currency = str(node["currency"])
        return AccountInfo(
            external_account_id=self.account_id, name=str(node.get("name") or self.account_id), currency=self._currency
        )

    def currency(self) -> str:
        if self._currency is None:
            self.account()
        assert self._currency is not None
        return self._currency

    def _entity(self, entity_type: str, node: Mapping[str, Any]) -> PlatformEntity:
        currency = self.currency()
        raw = node.get("daily_budget")
        budget = from_meta(int(raw), currency) if raw not in (None, "", "0", 0) else None
        parent = PARENT[entity_type]
        return PlatformEntity(
            entity_type=entity_type,
            external_id=str(node["id"]),
            parent_external_id=str(node[parent]) if parent and node.get(parent) else None,
            name=str(node.get("name") or ""),
            status=str(node.get("status") or "unknown").lower(),
            daily_budget=budget,
            currency=currency,
            edited_at=_time(node.get("updated_time")),
        )

    def list_entities(self) -> list[PlatformEntity]:
        account = AdAccount(self.account_id, api=self.api)
        edges = {"campaign": account.get_campaigns, "ad_set": account.get_ad_sets, "ad": account.get_ads}
        out: list[PlatformEntity] = []
        for entity_type, edge in edges.items():
            nodes: Iterable[Any] = self._call(
                f"list {entity_type}s",
                lambda edge=edge, entity_type=entity_type: list(
                    edge(fields=FIELDS[entity_type], params={"limit": PAGE_SIZE})
                ),
            )
            out.extend(self._entity(entity_type, node) for node in nodes)
        return out

    def _object(self, entity_type: str, external_id: str) -> Any:
        try:
            return _CLASSES[entity_type](external_id, api=self.api)
        except KeyError:
            raise ValueError(f"Meta has no {entity_type} objects") from None

    def read(self, entity_type: str, external_id: str, parent_external_id: str | None = None) -> PlatformEntity:
        obj = self._object(entity_type, external_id)
        node = self._call(f"read {entity_type} {external_id}", lambda: obj.api_get(fields=FIELDS[entity_type]))
        return self._entity(entity_type, node)

    def set_daily_budget(
        self, entity_type: str, external_id: str, amount: int, currency: str, parent_external_id: str | None = None
    ) -> None:
        if entity_type not in ("campaign", "ad_set"):
            raise ValueError(f"a Meta {entity_type} has no daily budget")
        if currency.upper() != self.currency():
            raise ValueError(f"the ad account spends in {self.currency()}, not {currency}")
        value = to_meta(amount, currency)
        obj = self._object(entity_type, external_id)
        self._call(
            f"set {entity_type} {external_id} daily_budget={value}",
            lambda: obj.api_update(params={"daily_budget": value}),
        )

    def set_status(
        self, entity_type: str, external_id: str, status: LiveStatus, parent_external_id: str | None = None
    ) -> None:
        obj = self._object(entity_type, external_id)
        self._call(
            f"set {entity_type} {external_id} status={STATUSES[status]}",
            lambda: obj.api_update(params={"status": STATUSES[status]}),
        )
