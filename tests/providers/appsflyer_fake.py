"""A fake AppsFlyer Master API on 127.0.0.1, speaking the documented shapes.

`GET /api/master-agg-data/v4/app/{app_id}` with `Authorization: Bearer <token>`, `from`/`to`
(yyyy-mm-dd, at most 31 days), `groupings`, `kpis`, `format=json`: a JSON list of flat rows
keyed by the report's column labels ("Install Time", "Campaign", "Adset", "Ad", "GEO", "Cost",
"Installs"), aggregated over the groupings asked for. Errors as the Master API reference gives
them: 401 `{"message": "The supplied API token is invalid"}`, 403 "Not authorized app-ids: ..."
for an app the token cannot see, 404 "Not found" (Master API not in the plan), a bare 429 when
limited. `fail_next` scripts answers (a 429, a 503, ...) served before the real ones; `rows`
is what the account "has", so a test restates a day by changing it between syncs.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

TOKEN = "af-v2-token-0123456789abcdef"
APP_ID = "id123456789"
# The Master API's column label for each grouping / KPI (JSON keys as the report names them).
LABELS = {
    "install_time": "Install Time",
    "c": "Campaign",
    "af_adset": "Adset",
    "af_ad": "Ad",
    "geo": "GEO",
    "pid": "Media Source",
    "cost": "Cost",
    "installs": "Installs",
}


@dataclass
class Row:
    """One ad's figures on one day in one country (the account's finest grain)."""

    day: date
    campaign: str
    adset: str
    ad: str
    geo: str
    cost: float
    installs: int = 0
    media_source: str = "Facebook Ads"

    def value(self, grouping: str) -> Any:
        return {
            "install_time": self.day.isoformat(),
            "c": self.campaign,
            "af_adset": self.adset,
            "af_ad": self.ad,
            "geo": self.geo,
            "pid": self.media_source,
        }[grouping]


@dataclass
class AppsFlyerFake:
    server: HTTPServer
    rows: list[Row] = field(default_factory=list)
    token: str = TOKEN
    app_id: str = APP_ID
    # Answers served before any real one: (status, body, headers).
    fail_next: list[tuple[int, str, dict[str, str]]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return self.server.url_for("").rstrip("/")

    def answers(self, status: int) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["status"] == status]

    def handle(self, request: Request) -> Response:
        with self._lock:
            response = self._answer(request)
            self.requests.append({"args": dict(request.args), "status": response.status_code, "at": time.monotonic()})
            return response

    def _answer(self, request: Request) -> Response:
        if self.fail_next:
            status, body, headers = self.fail_next.pop(0)
            return Response(body, status=status, headers=headers, content_type="text/plain")
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return _json({"message": "The supplied API token is invalid"}, 401)
        app_id = request.path.rsplit("/", 1)[-1]
        if app_id not in (self.app_id, "all"):
            return _json(f"Not authorized app-ids: {app_id}", 403)
        try:
            start = date.fromisoformat(request.args["from"])
            end = date.fromisoformat(request.args["to"])
        except (KeyError, ValueError):
            return _json("Unrecognized date format.", 403)
        if start > end:
            return _json("From date can't be after To date.", 403)
        if (end - start).days >= 31:
            return _json(
                "Something went wrong. Please re-try to download in a minute, choose a narrower time range", 416
            )
        groupings = [g for g in request.args.get("groupings", "").split(",") if g]
        kpis = [k for k in request.args.get("kpis", "").split(",") if k]
        if not groupings:
            return _json("No Groupings Selected", 416)
        if not kpis:
            return _json("No KPIs provided.", 403)
        if request.args.get("format") != "json":
            return Response("csv is not served by this fake", status=400)
        cells: dict[tuple[Any, ...], dict[str, Any]] = {}
        for row in self.rows:
            if not start <= row.day <= end:
                continue
            key = tuple(row.value(g) for g in groupings)
            cell = cells.setdefault(key, {LABELS[g]: v for g, v in zip(groupings, key, strict=True)})
            for kpi in kpis:
                cell[LABELS[kpi]] = cell.get(LABELS[kpi], 0) + (row.cost if kpi == "cost" else row.installs)
        return _json(list(cells.values()), 200)


def _json(body: Any, status: int) -> Response:
    return Response(json.dumps(body), status=status, content_type="application/json")


@contextmanager
def appsflyer_fake() -> Iterator[AppsFlyerFake]:
    server = HTTPServer(host="127.0.0.1", port=0)
    server.start()
    fake = AppsFlyerFake(server)
    server.expect_request(re.compile(r"^/api/master-agg-data/v4/app/[^/]+$")).respond_with_handler(fake.handle)
    try:
        yield fake
    finally:
        server.clear()
        server.stop()
