"""A fake Meta Graph API (Marketing API) on 127.0.0.1, for the facebook-business SDK.

Shapes as Meta documents them (Marketing API reference: Ad Account, Ad Campaign, Ad Set, Ad;
"Paginated Results"; "Error Codes"; "Rate Limiting"): paths `/{version}/{node}` and
`/{version}/act_<id>/{campaigns|adsets|ads}`; the token in the `access_token` query parameter
(the SDK's session sends it so); `fields` comma-separated; lists as `{"data": [...], "paging":
{"cursors": {"before", "after"}, "next"}}` with `next` only while more pages follow (at most
`page_size` items a page, whatever `limit` asks, so that a test sees paging); updates as `POST
/{version}/{id}` with form fields, answered `{"success": true}`; budgets as strings in Meta's
offset unit; `updated_time` as `2026-11-24T10:00:00+0000`.

Errors as Meta sends them, `{"error": {"message", "type", "code", "error_subcode",
"fbtrace_id"}}`: a wrong or revoked token is code 190 (`OAuthException`, HTTP 400); `rate_limited`
answers that many calls with code 17 / subcode 2446079 "User request limit reached" (HTTP 400)
and an `X-Business-Use-Case-Usage` header whose `estimated_time_to_regain_access` is
`regain_minutes`; `http_429` answers that many with a bare HTTP 429.

Test hooks: `edit(id, daily_budget=…, status=…)` is an operator's change in Ads Manager, behind
FloKit's back (it moves `updated_time`); `writes` records every update FloKit sent, with the
absolute values as received; `fail_writes[id] = n` answers the next n updates of that object
with HTTP 500, code 2 "Service temporarily unavailable" (`is_transient`), so a write can fail for
good once the client's retries run out.
"""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from werkzeug.wrappers import Request, Response

from tests.providers.serving import ThreadedFake

TOKEN = "EAAG-meta-fake-token-0123456789"
ACCOUNT = "act_1234567890"
EDGES = {"campaigns": "campaign", "adsets": "ad_set", "ads": "ad"}


def _time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S+0000")


@dataclass
class MetaGraphFake(ThreadedFake):
    currency: str = "USD"
    account_name: str = "Acme Fitness US"
    token: str = TOKEN
    page_size: int = 2
    rate_limited: int = 0
    regain_minutes: int = 0
    http_429: int = 0
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    writes: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    fail_writes: dict[str, int] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _ids: Any = field(default_factory=lambda: itertools.count(120210000000000001))

    # -- the account's objects ---------------------------------------------------------------

    def add(self, kind: str, name: str, *, parent: str | None = None, daily_budget: int | None = None,
            status: str = "ACTIVE") -> str:  # fmt: skip
        """A campaign, ad set or ad (Meta's `kind`: campaign, ad_set, ad); its new id."""
        object_id = str(next(self._ids))
        node: dict[str, Any] = {"id": object_id, "name": name, "status": status, "kind": kind,
                                "updated_time": _time(datetime(2026, 11, 1, 9, 0, tzinfo=UTC))}  # fmt: skip
        if daily_budget is not None:
            node["daily_budget"] = str(daily_budget)
        if kind == "ad_set":
            node["campaign_id"] = parent
        if kind == "ad":
            node["adset_id"] = parent
        self.objects[object_id] = node
        return object_id

    def edit(self, object_id: str, **fields: Any) -> None:
        """An operator's change in Ads Manager, not through FloKit."""
        with self._lock:
            node = self.objects[object_id]
            for name, value in fields.items():
                node[name] = str(value)
            node["updated_time"] = _time(datetime.now(UTC))

    def budget(self, object_id: str) -> int:
        return int(self.objects[object_id]["daily_budget"])

    # -- HTTP ----------------------------------------------------------------------------------

    def _error(self, status: int, code: int, message: str, *, subcode: int | None = None,
               headers: dict[str, str] | None = None, kind: str = "OAuthException") -> Response:  # fmt: skip
        error: dict[str, Any] = {"message": message, "type": kind, "code": code, "fbtrace_id": "AbCdEfGhIjK"}
        if subcode is not None:
            error["error_subcode"] = subcode
        return Response(json.dumps({"error": error}), status=status, mimetype="application/json", headers=headers)

    def _respond(self, request: Request) -> Response:
        params = {**request.args.to_dict(), **request.form.to_dict()}
        parts = [p for p in request.path.split("/") if p]
        self.requests.append((request.method, request.path))
        if params.get("access_token") != self.token:
            return self._error(
                400, 190, "Error validating access token: The session has been invalidated.", subcode=460
            )
        with self._lock:
            if self.http_429:
                self.http_429 -= 1
                return Response("Too Many Requests", status=429)
            if self.rate_limited:
                self.rate_limited -= 1
                usage = {ACCOUNT.removeprefix("act_"): [{"type": "ads_management", "call_count": 100,
                         "total_cputime": 20, "total_time": 20,
                         "estimated_time_to_regain_access": self.regain_minutes}]}  # fmt: skip
                return self._error(
                    400, 17, "(#17) User request limit reached", subcode=2446079,
                    headers={"X-Business-Use-Case-Usage": json.dumps(usage)},
                )  # fmt: skip
        if len(parts) < 2 or not parts[0].startswith("v"):
            return self._error(400, 2500, "Unknown path components", kind="OAuthException")
        node_id, edge = parts[1], (parts[2] if len(parts) > 2 else None)
        fields = [f for f in params.get("fields", "").split(",") if f]
        if node_id == ACCOUNT and edge is None and request.method == "GET":
            account = {"id": ACCOUNT, "account_id": ACCOUNT.removeprefix("act_"), "name": self.account_name,
                       "currency": self.currency}  # fmt: skip
            return self._json({k: v for k, v in account.items() if k in fields or k == "id"})
        if node_id == ACCOUNT and edge in EDGES:
            return self._page(request, EDGES[edge], fields, params)
        node = self.objects.get(node_id)
        if node is None or edge is not None:
            return self._error(400, 100, f"Unsupported get request. Object with ID '{node_id}' does not exist",
                               subcode=33, kind="GraphMethodException")  # fmt: skip
        if request.method == "POST" and self.fail_writes.get(node_id, 0) > 0:
            with self._lock:
                self.fail_writes[node_id] -= 1
            error = {
                "message": "An unexpected error has occurred. Please retry your request later.",
                "type": "OAuthException",
                "code": 2,
                "is_transient": True,
                "fbtrace_id": "AbCdEfGhIjK",
            }
            return Response(json.dumps({"error": error}), status=500, mimetype="application/json")
        if request.method == "POST":
            update = {k: v for k, v in request.form.to_dict().items() if k in ("daily_budget", "status")}
            with self._lock:
                self.writes.append((node_id, update))
                node.update(update)
                node["updated_time"] = _time(datetime.now(UTC))
            return self._json({"success": True})
        return self._json(self._fields(node, fields))

    def _fields(self, node: dict[str, Any], fields: list[str]) -> dict[str, Any]:
        return {k: v for k, v in node.items() if k in fields or k == "id"}

    def _page(self, request: Request, kind: str, fields: list[str], params: dict[str, str]) -> Response:
        items = [n for n in self.objects.values() if n["kind"] == kind]
        start = int(params.get("after", "0") or 0)
        size = min(int(params.get("limit", "25")), self.page_size)
        chunk = items[start : start + size]
        paging: dict[str, Any] = {"cursors": {"before": str(start), "after": str(start + len(chunk))}}
        if start + size < len(items):
            query = {k: v for k, v in params.items() if k != "access_token"}
            query["after"] = str(start + len(chunk))
            paging["next"] = f"{self.url}{request.path}?{urlencode(query)}"
        return self._json({"data": [self._fields(n, fields) for n in chunk], "paging": paging})

    def _json(self, body: object) -> Response:
        return Response(json.dumps(body), mimetype="application/json")
