"""AppsFlyer (attribution_provider_b): spend from the Master API, re-pulled over a lookback window.

Each sync asks the aggregate Master API for cost by day x campaign x ad set x ad x country over
the last `lookback_days` days (default 7: AppsFlyer restates API-sourced cost up to 7 days back,
support article 360008850257) and makes those days the workspace's whole spend
(`SyncTarget.replace_spend`), so a restated figure replaces the old one and a second sync of the
same window changes nothing. The mapping is `transforms.integrations.attribution_provider_b`.
Installs come from the Push API through ingest (`/ingest/attribution_provider_b`), not from here.

Rate limits: the Master API documents none of its own beyond the Pull API's per-app quotas
(support article 207034366) and answers a bare 429 when limited: no `Retry-After` is documented,
so a 429 without one waits `rate_limit_wait_s` (a minute by default, the shortest Pull API quota
period) and one with one waits what it says.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any, ClassVar

import requests

from clients.http import RetryRules, body_text, json_or_none, retry_after_seconds
from orchestration.syncs.connectors import Connector, Log
from orchestration.syncs.http import ProviderClient
from transforms.integrations import attribution_provider_b as appsflyer
from transforms.integrations.errors import MAX_PROVIDER_TEXT, SyncFailure, truncate
from transforms.integrations.kinds import ValidConfig
from warehouse.integrations.target import SyncTarget

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
            raise SyncFailure("bad_response", f"{what}: {exc}") from exc


def client(config: ValidConfig) -> AppsFlyerClient:
    return AppsFlyerClient(
        base_url=str(config.get("base_url")), api_token=str(config.get("api_token")), app_id=str(config.get("app_id"))
    )


def _currency(config: ValidConfig) -> tuple[str, str | None]:
    try:
        return appsflyer.report_currency(config.get("currency"))
    except ValueError as exc:
        raise SyncFailure("config", str(exc)) from exc


def check(api: AppsFlyerClient) -> str:
    """One day of installs by install day: the token, the app id and the Master API plan in one call."""
    yesterday = datetime.now(UTC).date() - timedelta(days=1)
    rows = api.master_report(start=yesterday, end=yesterday, groupings=("install_time",), kpis=("installs",))
    installs = sum(float(r.get("installs") or 0) for r in rows)
    return f"AppsFlyer Master API answered for app {api.app_id}: {installs:.0f} install(s) on {yesterday}"


def sync(api: AppsFlyerClient, target: SyncTarget, config: ValidConfig, log: Log) -> None:
    currency, parameter = _currency(config)
    days = appsflyer.window(target.now.date(), int(config.get("lookback_days") or 7))
    rows: list[dict[str, Any]] = []
    for start, end in appsflyer.windows(days):
        part = api.master_report(start=start, end=end, currency=parameter, log=log)
        log(f"appsflyer: {len(part)} row(s) for {start}..{end}")
        rows.extend(part)
    try:
        frame = appsflyer.spend_frame(rows, workspace_id=target.workspace_id, currency=currency, days=days)
    except appsflyer.ReportProblem as exc:
        raise SyncFailure("bad_response", f"AppsFlyer Master API: {exc}") from exc
    written = target.replace_spend(frame, days)
    log(f"appsflyer: {written} spend row(s) in {currency} for {days[0]}..{days[-1]}")


CONNECTOR = Connector(type="attribution_provider_b", client=client, check=check, sync=sync)
