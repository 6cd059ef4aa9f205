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
from warehouse.subscriptions.overview import overview_answer


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
    app = state()
    cur = report_reader().cursor()
    return respond(overview_answer(app.db, cur, app.settings.paths, principal().workspace_id, datetime.now(UTC)))
