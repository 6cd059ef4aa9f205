"""A fake Apple Search Ads Campaign Management API v5 (and its OAuth token endpoint) on 127.0.0.1.

Shapes as Apple documents them ("Implementing OAuth for the Apple Search Ads API", "Calling the
Apple Search Ads API", "Get all Campaigns", "Get a Campaign", "Update a Campaign", "Get all Ad
Groups", "Update an Ad Group", `Pagination`, `ApiErrorResponse`):

- `POST /auth/oauth2/token` (form: `grant_type=client_credentials`, `client_id`,
  `client_secret`, `scope=searchadsorg`): the client secret must be an ES256 JWT signed by the
  key whose public half the fake holds, `kid` = key id, `sub` = client id, `iss` = team id, `aud`
  = "https://appleid.apple.com", not expired; answered `{"access_token", "token_type": "Bearer",
  "expires_in"}`, else 400 `{"error": "invalid_client"}`.
- `/api/v5/...` with `Authorization: Bearer <token>` (else 401 UNAUTHORIZED) and `X-AP-Context:
  orgId=<org>` (else 403 FORBIDDEN "A required header was not specified or was invalid."):
  `GET acls`, `GET campaigns`, `GET campaigns/{id}`, `PUT campaigns/{id}` (body `{"campaign":
  {...}}`), `GET campaigns/{id}/adgroups`, `GET`/`PUT campaigns/{cid}/adgroups/{id}`. Lists are
  `{"data": [...], "pagination": {"totalResults", "startIndex", "itemsPerPage"}, "error": null}`,
  at most `page_size` items a page whatever `limit` asks (so that a test sees paging). Errors are
  `{"data": null, "pagination": null, "error": {"errors": [{"messageCode", "message", "field"}]}}`.

Switches: `rate_limited` answers that many API calls 429 (TOO_MANY_REQUESTS) with
`Retry-After: retry_after`; `revoked` answers every API call 401 and refuses new tokens.
Test hooks: `edit(id, ...)` is an operator's change in the Apple Search Ads UI (it moves
`modificationTime`); `writes` records every PUT body FloKit sent.
"""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from werkzeug.wrappers import Request, Response

from tests.providers.serving import ThreadedFake

CLIENT_ID = "SEARCHADS.7c2f1b0e-0000-4d4e-9f00-fake00000001"
TEAM_ID = "SEARCHADS.7c2f1b0e-0000-4d4e-9f00-fake00000001"
KEY_ID = "d136aa66-0000-4b9c-8c4a-fake00000002"
ORG_ID = 40669820


def new_private_key() -> tuple[ec.EllipticCurvePrivateKey, str]:
    """A P-256 key and its PEM text (what the operator pastes into the config)."""
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    return key, pem


def _time(moment: datetime) -> str:
    """Apple's `modificationTime`: UTC without a zone, milliseconds."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}"


FIRST_EDIT = _time(datetime(2026, 11, 1, 9, 0, tzinfo=UTC))


@dataclass
class AppleSearchAdsFake(ThreadedFake):
    public_key: ec.EllipticCurvePublicKey
    currency: str = "USD"
    org_name: str = "Acme Fitness"
    page_size: int = 2
    token_lifetime_s: int = 3600
    rate_limited: int = 0
    retry_after: int = 1
    revoked: bool = False
    campaigns: dict[int, dict[str, Any]] = field(default_factory=dict)
    ad_groups: dict[int, dict[str, Any]] = field(default_factory=dict)
    writes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    tokens_issued: int = 0
    _tokens: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _ids: Any = field(default_factory=lambda: itertools.count(542370642))

    @property
    def token_url(self) -> str:
        return f"{self.url}/auth/oauth2/token"

    # -- the organization's objects ------------------------------------------------------------

    def add_campaign(self, name: str, daily_budget: str, *, status: str = "ENABLED") -> int:
        campaign_id = next(self._ids)
        self.campaigns[campaign_id] = {
            "id": campaign_id, "orgId": ORG_ID, "name": name, "adamId": 427916203,
            "dailyBudgetAmount": {"amount": daily_budget, "currency": self.currency},
            "budgetAmount": None, "paymentModel": "PAYG", "status": status, "servingStatus": "RUNNING",
            "displayStatus": "RUNNING", "deleted": False, "modificationTime": FIRST_EDIT,
        }  # fmt: skip
        return campaign_id

    def add_ad_group(self, campaign_id: int, name: str, *, status: str = "ENABLED") -> int:
        group_id = next(self._ids)
        self.ad_groups[group_id] = {
            "id": group_id, "campaignId": campaign_id, "orgId": ORG_ID, "name": name, "status": status,
            "servingStatus": "RUNNING", "displayStatus": "RUNNING", "deleted": False,
            "defaultBidAmount": {"amount": "1", "currency": self.currency},
            "modificationTime": FIRST_EDIT,
        }  # fmt: skip
        return group_id

    def edit(self, object_id: int, **fields: Any) -> None:
        """An operator's change in the Apple Search Ads UI, not through FloKit."""
        with self._lock:
            obj = self.campaigns.get(object_id) or self.ad_groups[object_id]
            obj.update(fields)
            obj["modificationTime"] = _time(datetime.now(UTC))

    # -- HTTP ----------------------------------------------------------------------------------

    def _error(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Response:
        body = {
            "data": None,
            "pagination": None,
            "error": {"errors": [{"messageCode": code, "message": message, "field": ""}]},
        }
        return Response(json.dumps(body), status=status, mimetype="application/json", headers=headers)

    def _json(self, body: object) -> Response:
        return Response(json.dumps(body), mimetype="application/json")

    def _token(self, request: Request) -> Response:
        form = request.form
        refused = Response(json.dumps({"error": "invalid_client"}), status=400, mimetype="application/json")
        if self.revoked or form.get("grant_type") != "client_credentials" or form.get("scope") != "searchadsorg":
            return refused
        secret = form.get("client_secret", "")
        try:
            header = jwt.get_unverified_header(secret)
            claims = jwt.decode(secret, self.public_key, algorithms=["ES256"], audience="https://appleid.apple.com",
                                options={"require": ["exp", "iat", "sub", "iss", "aud"]})  # fmt: skip
        except jwt.PyJWTError:
            return refused
        if header.get("kid") != KEY_ID or claims["sub"] != CLIENT_ID or claims["iss"] != TEAM_ID:
            return refused
        if form.get("client_id") != CLIENT_ID:
            return refused
        with self._lock:
            self.tokens_issued += 1
            token = f"asa-token-{self.tokens_issued:04d}"
            self._tokens.add(token)
        return self._json({"access_token": token, "token_type": "Bearer", "expires_in": self.token_lifetime_s})

    def _respond(self, request: Request) -> Response:
        if request.path == "/auth/oauth2/token" and request.method == "POST":
            return self._token(request)
        bearer = request.headers.get("Authorization", "").removeprefix("Bearer ")
        if self.revoked or bearer not in self._tokens:
            return self._error(401, "UNAUTHORIZED", "Invalid token")
        if request.headers.get("X-AP-Context") != f"orgId={ORG_ID}":
            return self._error(403, "FORBIDDEN", "A required header was not specified or was invalid.")
        with self._lock:
            if self.rate_limited:
                self.rate_limited -= 1
                return self._error(
                    429, "TOO_MANY_REQUESTS", "Too many requests", {"Retry-After": str(self.retry_after)}
                )
        parts = request.path.removeprefix("/api/v5/").strip("/").split("/")
        if parts == ["acls"]:
            acl = {"orgName": self.org_name, "orgId": ORG_ID, "currency": self.currency,
                   "timeZone": "America/Los_Angeles", "paymentModel": "PAYG", "roleNames": ["API Campaign Manager"],
                   "parentOrgId": None}  # fmt: skip
            return self._json({"data": [acl], "pagination": None, "error": None})
        if parts[0] != "campaigns":
            return self._error(404, "NOT_FOUND", "Resource not found")
        if len(parts) == 1:
            return self._page(request, list(self.campaigns.values()))
        campaign = self.campaigns.get(int(parts[1])) if parts[1].isdigit() else None
        if campaign is None:
            return self._error(404, "NOT_FOUND", "Campaign not found")
        if len(parts) == 2:
            return self._object(request, campaign, envelope="campaign")
        groups = [g for g in self.ad_groups.values() if g["campaignId"] == campaign["id"]]
        if len(parts) == 3 and parts[2] == "adgroups":
            return self._page(request, groups)
        group = next((g for g in groups if str(g["id"]) == parts[3]), None) if len(parts) == 4 else None
        if group is None:
            return self._error(404, "NOT_FOUND", "Ad group not found")
        return self._object(request, group, envelope=None)

    def _object(self, request: Request, obj: dict[str, Any], *, envelope: str | None) -> Response:
        if request.method == "PUT":
            body = request.get_json(silent=True)
            change = body.get(envelope) if envelope and isinstance(body, dict) else body
            if not isinstance(change, dict):
                return self._error(400, "INVALID_INPUT", "The payload is not a valid update")
            with self._lock:
                self.writes.append((request.path, body))
                obj.update({k: v for k, v in change.items() if k in ("dailyBudgetAmount", "status", "name")})
                obj["modificationTime"] = _time(datetime.now(UTC))
        return self._json({"data": obj, "pagination": None, "error": None})

    def _page(self, request: Request, items: list[dict[str, Any]]) -> Response:
        offset = int(request.args.get("offset", "0"))
        size = min(int(request.args.get("limit", "20")), self.page_size)
        chunk = items[offset : offset + size]
        pagination = {"totalResults": len(items), "startIndex": offset, "itemsPerPage": len(chunk)}
        return self._json({"data": chunk, "pagination": pagination, "error": None})
