"""apple_search_ads: Apple Search Ads Campaign Management API v5 over `requests`, an ad platform client.

Authentication is Apple's OAuth client-credentials flow ("Implementing OAuth for the Apple Search
Ads API"): the client secret is an ES256 JWT signed with the account's private key (header `kid`
= key id; claims `sub` = client id, `iss` = team id, `aud` = "https://appleid.apple.com", `iat`,
`exp`), exchanged at the token endpoint (`grant_type=client_credentials`, `scope=searchadsorg`)
for a bearer token that is cached until shortly before its `expires_in`. Every call carries
`Authorization: Bearer …` and `X-AP-Context: orgId=<org_id>` ("Calling the Apple Search Ads API").

Objects: campaigns (`GET /api/v5/campaigns`) and their ad groups (`GET
/api/v5/campaigns/{id}/adgroups`), every page (`limit`/`offset`; the answer's `pagination`
`totalResults`, `startIndex`, `itemsPerPage`). A campaign's `dailyBudgetAmount` is `{amount,
currency}` with the amount a decimal string in major units; ad groups have no budget. `status`
ENABLED / PAUSED (→ active / paused), `deleted` → deleted; `modificationTime` is UTC without a
zone. The account's currency is the organization's, from `GET /api/v5/acls`. Writes: `PUT
/api/v5/campaigns/{id}` with the campaign envelope `{"campaign": {...}}` (Apple: "Use a campaign
object JSON envelope in your campaign update request payloads"), `PUT
/api/v5/campaigns/{cid}/adgroups/{id}` without one.

Errors: 401, 403 and a refused token (`invalid_client`, `invalid_grant`) → `AuthError`; 429 →
`RateLimited` with `Retry-After` when Apple sends it; 5xx and network failures → transient
`ProviderError`; other 4xx → `ProviderError` (`config`). Apple's error body is `{"error":
{"errors": [{"messageCode", "message", "field"}]}}`; its message is kept.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import jwt
import requests

from clients.ad_platform import LiveStatus, Retrier
from clients.egress import Egress
from clients.http import guarded_session, json_or_none, parse_retry_after
from transforms.adaccounts.entities import AccountInfo, PlatformEntity
from transforms.adaccounts.errors import AuthError, PlatformError, ProviderError, RateLimited
from transforms.adaccounts.kinds import ValidConfig
from transforms.adaccounts.money import InexactAmount, major_text, to_minor
from transforms.integrations.errors import MAX_PROVIDER_TEXT, provider_text, truncate
from transforms.webhooks.urls import InvalidUrl

AUDIENCE = "https://appleid.apple.com"
SCOPE = "searchadsorg"
PAGE_SIZE = 1000  # Apple's maximum `limit`
SECRET_LIFETIME_S = 3600  # the client secret only buys a token; Apple allows up to 180 days
TOKEN_MARGIN_S = 60
STATUSES: dict[LiveStatus, str] = {"active": "ENABLED", "paused": "PAUSED"}
USER_AGENT = "FloKit-adaccounts/1"


def _time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _status(obj: dict[str, Any]) -> str:
    if obj.get("deleted"):
        return "deleted"
    raw = str(obj.get("status") or "unknown").upper()
    return {"ENABLED": "active", "PAUSED": "paused"}.get(raw, raw.lower())


def _message(response: requests.Response) -> str:
    """Apple's words from its JSON error, short; the body of an answer that is not Apple's never."""
    body = json_or_none(response)
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            errors = error.get("errors")
            if isinstance(errors, list) and errors and isinstance(errors[0], dict):
                first = errors[0]
                text = f"{first.get('messageCode', '')}: {first.get('message', '')}".strip(": ")
                return truncate(text, MAX_PROVIDER_TEXT)
        if isinstance(error, str):
            return truncate(f"{error}: {body.get('error_description', '')}".strip(": "), MAX_PROVIDER_TEXT)
    return provider_text(body, response.reason)


class AppleSearchAdsClient:
    platform = "apple_search_ads"

    def __init__(
        self,
        config: ValidConfig,
        *,
        egress: Egress | None = None,
        retrier: Retrier | None = None,
        timeout: tuple[float, float] = (5.0, 60.0),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.base_url: str = config.get("base_url").rstrip("/")
        self.token_url: str = config.get("token_url")
        self.client_id: str = config.get("client_id")
        self.team_id: str = config.get("team_id")
        self.key_id: str = config.get("key_id")
        self.org_id = str(config.get("org_id"))
        self._private_key: str = config.get("private_key")
        self.retry = retrier or Retrier()
        self.timeout = timeout
        self.clock = clock
        self.session = guarded_session(egress)  # the egress policy's connections, no redirects
        self.session.headers["User-Agent"] = USER_AGENT
        self._token: str | None = None
        self._token_expires = 0.0
        self._currency: str | None = None
        self.tokens_fetched = 0

    def __repr__(self) -> str:  # never the key or the token
        return f"AppleSearchAdsClient(org_id={self.org_id!r}, base_url={self.base_url!r})"

    # -- auth ----------------------------------------------------------------------------------

    def client_secret(self) -> str:
        now = int(self.clock())
        claims = {
            "sub": self.client_id,
            "iss": self.team_id,
            "aud": AUDIENCE,
            "iat": now,
            "exp": now + SECRET_LIFETIME_S,
        }
        return jwt.encode(claims, self._private_key, algorithm="ES256", headers={"kid": self.key_id})

    def token(self) -> str:
        if self._token is not None and self.clock() < self._token_expires - TOKEN_MARGIN_S:
            return self._token
        form = {
            "grant_type": "client_credentials",
            "client_id": self.client_id,
            "client_secret": self.client_secret(),
            "scope": SCOPE,
        }
        response = self._send("POST", self.token_url, what="request an access token", data=form, auth=False)
        body = self._json(response, "the token answer")
        if not isinstance(body, dict) or not body.get("access_token"):
            raise ProviderError("Apple Search Ads: the token answer holds no access_token", code="bad_response")
        self.tokens_fetched += 1
        self._token = str(body["access_token"])
        self._token_expires = self.clock() + float(body.get("expires_in") or 0)
        return self._token

    # -- HTTP ----------------------------------------------------------------------------------

    def _send(self, method: str, url: str, *, what: str, auth: bool = True, **kwargs: Any) -> requests.Response:
        headers = {"X-AP-Context": f"orgId={self.org_id}"} if auth else {}
        if auth:
            headers["Authorization"] = f"Bearer {self.token()}"
        try:
            response = self.session.request(method, url, headers=headers, timeout=self.timeout, **kwargs)
        except (requests.ConnectionError, requests.Timeout) as error:
            raise ProviderError(f"Apple Search Ads: {what}: {type(error).__name__}", transient=True) from None
        except InvalidUrl as error:  # the egress policy refused the address (clients/egress.py)
            raise ProviderError(f"Apple Search Ads: {what}: {error}", code="config") from None
        if response.ok:
            return response
        raise self._classify(response, what, auth=auth)

    def _classify(self, response: requests.Response, what: str, *, auth: bool) -> PlatformError:
        status = response.status_code
        text = f"Apple Search Ads: {what}: HTTP {status}: {_message(response)}"
        if status in (401, 403) or (not auth and status == 400):
            if auth and status == 401:
                self._token = None  # a revoked token: the next attempt asks for a new one
            return AuthError(text, status=status)
        if status == 429:
            return RateLimited(text, retry_after=parse_retry_after(response.headers.get("Retry-After")), status=status)
        if status >= 500:
            return ProviderError(text, transient=True, status=status)
        return ProviderError(text, code="config", status=status)

    def _json(self, response: requests.Response, what: str) -> Any:
        try:
            return response.json()
        except ValueError:
            raise ProviderError(f"Apple Search Ads: {what} is not JSON", code="bad_response") from None

    def _get(self, path: str, what: str, params: dict[str, Any] | None = None) -> Any:
        def attempt() -> Any:
            return self._json(self._send("GET", self.base_url + path, what=what, params=params), what)

        return self.retry(what, attempt)

    def _pages(self, path: str, what: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        offset = 0
        while True:
            body = self._get(path, what, {"limit": PAGE_SIZE, "offset": offset})
            data = body.get("data") if isinstance(body, dict) else None
            paging = body.get("pagination") if isinstance(body, dict) else None
            if not isinstance(data, list):
                raise ProviderError(f"Apple Search Ads: {what}: the answer has no data list", code="bad_response")
            out.extend(d for d in data if isinstance(d, dict))
            total = paging.get("totalResults") if isinstance(paging, dict) else None
            offset += len(data)
            if not data or not isinstance(total, int) or offset >= total:
                return out

    # -- the protocol --------------------------------------------------------------------------

    def account(self) -> AccountInfo:
        body = self._get("/api/v5/acls", "read the organizations (acls)")
        for acl in body.get("data") or [] if isinstance(body, dict) else []:
            if str(acl.get("orgId")) == self.org_id:
                self._currency = str(acl.get("currency") or "").upper() or None
                if self._currency is None:
                    break
                return AccountInfo(self.org_id, str(acl.get("orgName") or self.org_id), self._currency)
        raise AuthError(f"Apple Search Ads: the API user has no access to organization {self.org_id}")

    def currency(self) -> str:
        if self._currency is None:
            self.account()
        assert self._currency is not None
        return self._currency

    def _campaign(self, obj: dict[str, Any]) -> PlatformEntity:
        budget = obj.get("dailyBudgetAmount")
        minor = currency = None
        if isinstance(budget, dict) and budget.get("amount") not in (None, ""):
            currency = str(budget.get("currency") or self.currency()).upper()
            try:
                minor = to_minor(str(budget["amount"]), currency)
            except (InexactAmount, ArithmeticError, ValueError):
                raise ProviderError(
                    f"Apple Search Ads: campaign {obj.get('id')} has an unreadable budget {budget!r}",
                    code="bad_response",
                ) from None
        return PlatformEntity(
            "campaign",
            str(obj["id"]),
            None,
            str(obj.get("name") or ""),
            _status(obj),
            minor,
            currency or self.currency(),
            _time(obj.get("modificationTime")),
        )

    def _ad_group(self, obj: dict[str, Any]) -> PlatformEntity:
        return PlatformEntity(
            "ad_group",
            str(obj["id"]),
            str(obj.get("campaignId")),
            str(obj.get("name") or ""),
            _status(obj),
            None,
            self.currency(),
            _time(obj.get("modificationTime")),
        )

    def list_entities(self) -> list[PlatformEntity]:
        campaigns = [self._campaign(c) for c in self._pages("/api/v5/campaigns", "list campaigns")]
        out = list(campaigns)
        for campaign in campaigns:
            groups = self._pages(
                f"/api/v5/campaigns/{campaign.external_id}/adgroups",
                f"list campaign {campaign.external_id}'s ad groups",
            )
            out.extend(self._ad_group(g) for g in groups)
        return out

    def _path(self, entity_type: str, external_id: str, parent: str | None) -> str:
        if entity_type == "campaign":
            return f"/api/v5/campaigns/{external_id}"
        if entity_type == "ad_group":
            if not parent:
                raise ValueError("an Apple ad group is addressed under its campaign: give parent_external_id")
            return f"/api/v5/campaigns/{parent}/adgroups/{external_id}"
        raise ValueError(f"Apple Search Ads has no {entity_type} objects here")

    def read(self, entity_type: str, external_id: str, parent_external_id: str | None = None) -> PlatformEntity:
        path = self._path(entity_type, external_id, parent_external_id)
        body = self._get(path, f"read {entity_type} {external_id}")
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, dict):
            raise ProviderError(f"Apple Search Ads: read {entity_type} {external_id}: no data", code="bad_response")
        return self._campaign(data) if entity_type == "campaign" else self._ad_group(data)

    def _put(self, path: str, what: str, body: dict[str, Any]) -> None:
        self.retry(what, lambda: self._send("PUT", self.base_url + path, what=what, json=body))

    def set_daily_budget(
        self, entity_type: str, external_id: str, amount: int, currency: str, parent_external_id: str | None = None
    ) -> None:
        if entity_type != "campaign":
            raise ValueError(f"an Apple {entity_type} has no daily budget")
        money = {"amount": major_text(amount, currency), "currency": currency.upper()}
        self._put(
            self._path("campaign", external_id, None),
            f"set campaign {external_id} dailyBudgetAmount={money['amount']} {money['currency']}",
            {"campaign": {"dailyBudgetAmount": money}},
        )

    def set_status(
        self, entity_type: str, external_id: str, status: LiveStatus, parent_external_id: str | None = None
    ) -> None:
        path = self._path(entity_type, external_id, parent_external_id)
        body: dict[str, Any] = {"status": STATUSES[status]}
        self._put(
            path,
            f"set {entity_type} {external_id} status={STATUSES[status]}",
            {"campaign": body} if entity_type == "campaign" else body,
        )
