"""attribution_provider_b: AppsFlyer's Master API (aggregate cost and KPIs per app), with an API V2 token.

Rate limits: the Master API documents none of its own beyond the Pull API's per-app quotas
(support article 207034366) and answers a bare 429 when limited: no `Retry-After` is documented,
so a 429 without one waits `rate_limit_wait_s` (a minute by default, the shortest Pull API quota
period) and one with one waits what it says. The sync is
`orchestration.syncs.connectors.attribution_provider_b`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from typing import Any, ClassVar

import requests

from clients.http import ProviderClient, RetryRules, body_text, json_or_none, retry_after_seconds
from transforms.client_errors import error_for
from transforms.integrations import attribution_provider_b as appsflyer
from transforms.integrations.errors import MAX_PROVIDER_TEXT, truncate

Log = Callable[[str], None]

# AppsFlyer's plain-text errors are one short sentence ("Limit reached for ...").
MAX_PLAIN_TEXT = 80
MASTER_PATH = "/api/master-agg-data/v4/app/{app_id}"


def error_text(response: requests.Response) -> str:
    """AppsFlyer's words: `{"message": ...}` on 401, a bare JSON string or plain text on 403/404
    ("Not authorized app-ids: ...", "Not found", "Limit reached ..."; Master API reference, error
    responses). Plain text only as AppsFlyer sends it, a short `text/plain` line: the first line, cut
    to MAX_PLAIN_TEXT characters, never a page of an answer that was not AppsFlyer's."""
    body = json_or_none(response)
    if isinstance(body, str):
        return truncate(body, MAX_PROVIDER_TEXT)
    if body is None and response.headers.get("Content-Type", "").startswith("text/plain"):
        line = (response.text or "").strip().split("\n", 1)[0]
        if line:
            return truncate(line, MAX_PLAIN_TEXT)
    return body_text(response)


class AppsFlyerClient(ProviderClient):
    """The Master API for one app, with the account's API V2 token (Bearer)."""

    PROVIDER: ClassVar[str] = "appsflyer"
    SECRET_FIELDS: ClassVar[frozenset[str]] = frozenset({"api_token"})

    api_token: str
    app_id: str
    rate_limit_wait_s: float = 60.0

    def rules(self) -> RetryRules:
        wait = self.rate_limit_wait_s

        def retry_after(response: requests.Response) -> float | None:
            asked = retry_after_seconds(response)
            return wait if asked is None and response.status_code == 429 else asked

        return RetryRules(retry_after=retry_after, error_text=error_text)

    def _authorize(self, session: requests.Session) -> None:
        session.headers["Authorization"] = f"Bearer {self.api_token}"
        session.headers["Accept"] = "application/json"

    def master_report(
        self,
        *,
        start: date,
        end: date,
        groupings: tuple[str, ...] = appsflyer.GROUPINGS,
        kpis: tuple[str, ...] = appsflyer.KPIS,
        currency: str | None = None,
        log: Log | None = None,
    ) -> list[dict[str, Any]]:
        """The report's rows (keys normalized) for `start`..`end` (at most 31 days)."""
        params = {
            "from": start.isoformat(),
            "to": end.isoformat(),
            "groupings": ",".join(groupings),
            "kpis": ",".join(kpis),
            "format": "json",
        }
        if currency is not None:
            params["currency"] = currency
        http = self.http(log)
        what = f"AppsFlyer Master API {start}..{end}"
        response = http.request("GET", self.url(MASTER_PATH.format(app_id=self.app_id)), what=what, params=params)
        if not response.content.strip():
            return []  # an empty answer is an empty report
        try:
            return appsflyer.records(http.json(response, what=what))
        except appsflyer.ReportProblem as exc:
            raise error_for("bad_response", f"{what}: {exc}") from exc
