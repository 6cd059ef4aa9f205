"""`attribution_provider_a` (Adjust): daily ad spend from the Report Service API into `spend_raw`.

Adjust has no cursor and restates network spend for 14 days, so every sync re-pulls the last
`lookback_days` days (ending today, UTC) and makes them the workspace's whole spend of those
days (`SyncTarget.replace_spend`): a restated day replaces the old figures and the same window
twice changes nothing. The window is asked for a few days at a time (`CHUNK_DAYS`), each chunk
written before the next is fetched, so a large account's sync holds one chunk in memory.

Installs are in the report too, but the reports count installs from the attribution callbacks
(canonical events with the same campaign and creative names); landing the report's installs as
well would count every install twice. The sync logs the report's install count and keeps it in
the integration's state (`last_report`) so that an operator can compare the two.

The Report Service API's client and its HTTP rules: `clients.attribution_provider_a`.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

from clients.attribution_provider_a import AdjustClient
from orchestration.syncs.connectors import Connector, Log
from transforms.client_errors import error_for
from transforms.integrations import attribution_provider_a as adjust
from transforms.integrations.kinds import ValidConfig
from warehouse.integrations.target import SyncTarget


def client_for(config: ValidConfig, **overrides: Any) -> AdjustClient:
    """The client of one integration; `overrides` set the non-config knobs (tests, benchmarks)."""
    try:
        currency = adjust.currency_of(config.get("currency"))
    except ValueError as exc:
        raise error_for("config", str(exc)) from exc
    return AdjustClient(
        base_url=config.get("base_url"),
        api_token=config.get("api_token"),
        app_token=config.get("app_token"),
        currency=currency,
        lookback_days=config.get("lookback_days") or 14,
        **overrides,
    )


def _today(target: SyncTarget) -> date:
    now = target.now
    return (now.astimezone(UTC) if now.tzinfo else now).date()


def check(client: AdjustClient) -> str:
    """One small report: today's cost, one row per day."""
    today = datetime.now(UTC).date()
    rows = client.report([today], dimensions=("day",), metrics=("cost",))
    return f"Adjust answered: {len(rows)} row{'s' if len(rows) != 1 else ''} for {today.isoformat()}"


def sync(client: AdjustClient, target: SyncTarget, config: ValidConfig, log: Log) -> None:
    days = adjust.window(_today(target), client.lookback_days)
    total = adjust.ReportSummary()
    for chunk in adjust.chunks(days, client.chunk_days):
        rows = client.report(chunk, log)
        try:
            frame, summary = adjust.spend_frame(
                rows, workspace_id=target.workspace_id, currency=client.currency, days=chunk
            )
        except adjust.ReportProblem as exc:
            raise error_for("bad_response", f"Adjust report {adjust.date_period(chunk)}: {exc}") from exc
        del rows
        target.replace_spend(frame, chunk)
        total += summary
        log(
            f"Adjust {adjust.date_period(chunk)}: {summary.rows} report rows, {summary.spend_rows} spend rows "
            f"({summary.cost:.2f} {client.currency}), {summary.installs} installs"
        )
    log(
        f"Adjust: {len(days)} days ({adjust.date_period(days)}) replaced with {total.spend_rows} spend rows, "
        f"{total.cost:.2f} {client.currency}; the report counts {total.installs} installs "
        "(not landed: installs come from the attribution callbacks)"
    )
    target.state["last_report"] = {
        "first_day": days[0].isoformat(),
        "last_day": days[-1].isoformat(),
        "report_rows": total.rows,
        "spend_rows": total.spend_rows,
        "cost": round(total.cost, 6),
        "currency": client.currency,
        "installs": total.installs,
    }


CONNECTOR = Connector(type="attribution_provider_a", client=client_for, check=check, sync=sync)
