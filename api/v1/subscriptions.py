"""GET /v1/subscriptions/overview: the subscription business now (preview).

Stocks (active subscriptions and trials, MRR) are read live from the entitlement ledger at
request time, so a purchase a store notified a second ago counts; the 28-day flows come from the
published report store (`warehouse.subscriptions.overview`). Right after a refresh, the stocks
equal the report's last day (docs/metrics.md)."""

from __future__ import annotations

from datetime import UTC, datetime

from flask import Response

from api.auth import principal, require_key
from api.context import state
from api.openapi import operation
from api.report_reader import report_reader
from api.responses import respond
from api.v1 import blueprint
from transforms.subscriptions.answers import SubscriptionsOverview
from transforms.timefmt import iso_z
from warehouse import fx
from warehouse.subscriptions.inputs import catalog_frame
from warehouse.subscriptions.overview import live_stocks, published_flows
from warehouse.workspaces import get_workspace


@blueprint.get("/subscriptions/overview")
@require_key()
@operation(
    summary="Subscription overview (preview)",
    description="Active subscriptions and trials and MRR now, live from the entitlement ledger; net revenue and "
    "new customers of the last 28 days from the last refresh (flows_as_of). Preview.",
    responses={200: SubscriptionsOverview},
    tags=["reports"],
)
def subscriptions_overview() -> Response:
    workspace_id = principal().workspace_id
    now = datetime.now(UTC)
    app = state()
    rates = fx.load_rates(app.settings.paths)
    with app.db.read() as conn:
        currency = get_workspace(conn, workspace_id).reporting_currency
        catalog = catalog_frame(conn, workspace_id)
        live = live_stocks(conn, workspace_id, now, catalog=catalog, rates=rates, reporting=currency)
    flows = published_flows(report_reader().cursor(), workspace_id, now.date())
    mrr = round(live.mrr, 6)
    return respond(
        SubscriptionsOverview(
            active_subscriptions=live.active_subscriptions,
            active_trials=live.active_trials,
            mrr=mrr,
            arr=round(mrr * 12, 6),
            revenue_last_28_days=flows.net_revenue,
            new_customers_last_28_days=flows.new_customers,
            as_of=iso_z(now) or "",
            currency=currency,
            flows_as_of=iso_z(flows.as_of),
        )
    )
