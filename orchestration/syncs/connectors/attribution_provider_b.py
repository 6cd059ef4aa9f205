"""`attribution_provider_b` (AppsFlyer): spend from the Master API, re-pulled over a lookback window.

Each sync asks the aggregate Master API for cost by day x campaign x ad set x ad x country over
the last `lookback_days` days (default 7: AppsFlyer restates API-sourced cost up to 7 days back,
support article 360008850257) and makes those days the workspace's whole spend
(`SyncTarget.replace_spend`), so a restated figure replaces the old one and a second sync of the
same window changes nothing. The mapping is `transforms.integrations.attribution_provider_b`.
Installs come from the Push API through ingest (`/ingest/attribution_provider_b`), not from here.

The Master API's client and its rate-limit rules: `clients.attribution_provider_b`.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from clients.attribution_provider_b import AppsFlyerClient
from orchestration.syncs.connectors import Connector, Log
from transforms.client_errors import error_for
from transforms.integrations import attribution_provider_b as appsflyer
from transforms.integrations.kinds import ValidConfig
from warehouse.integrations.target import SyncTarget


def client(config: ValidConfig) -> AppsFlyerClient:
    return AppsFlyerClient(
        base_url=str(config.get("base_url")), api_token=str(config.get("api_token")), app_id=str(config.get("app_id"))
    )


def _currency(config: ValidConfig) -> tuple[str, str | None]:
    try:
        return appsflyer.report_currency(config.get("currency"))
    except ValueError as exc:
        raise error_for("config", str(exc)) from exc


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
        raise error_for("bad_response", f"AppsFlyer Master API: {exc}") from exc
    written = target.replace_spend(frame, days)
    log(f"appsflyer: {written} spend row(s) in {currency} for {days[0]}..{days[-1]}")


CONNECTOR = Connector(type="attribution_provider_b", client=client, check=check, sync=sync)
