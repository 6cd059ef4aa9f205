"""`subscription_provider_a` (RevenueCat): the reconciliation sync, through `clients/subscription_provider_a.py`.

The API has no "changed since" listing (`GET /v2/projects/{id}/customers` takes only `limit`,
`starting_after`, `search`), so every sync walks every customer: one page of customers, then per
customer its subscriptions, its App Store / Play Store subscriptions' transactions and its
one-time purchases (RevenueCat OpenAPI `openapi-spec/api-v2.yaml`, RevenueCat/docs bf39a9c).
Re-landing is harmless: event ids are deterministic (landing's claims) and the target's
high-water mark skips what was landed more than the claims' lifetime ago, so a re-run or a sync
40 days later lands nothing twice.

Pacing and retries under RevenueCat's rate limit: `clients.subscription_provider_a`.

With `export_bucket` and its key configured, a sync first reads RevenueCat's Scheduled Data
Exports (the Transactions feed, CSV or Parquet, delivered into the customer's bucket): the files
not read yet in their current version (`target.state["export_files"]`, key -> ETag, as for
Adapty's export), mapped to the same event ids as the API path
(`transforms.integrations.subscription_provider_a_exports`). The export goes first so that its
exact per-transaction figures, and the refunds and cancellations it dates, are what lands where
both paths state a transaction; the API walk then adds what the export has not delivered yet.
With exports, subscriptions in stores the API lists no transactions for are the export's alone
(the API can only name their periods by its own subscription id, which the export lacks).
"""

from __future__ import annotations

from clients.subscription_provider_a import RevenueCatClient, RevenueCatExportClient
from orchestration.syncs.connectors import Connector, Log
from transforms.client_errors import ClientError, error_for
from transforms.integrations.kinds import ValidConfig
from transforms.integrations.subscription_provider_a import STORES_WITH_TRANSACTIONS, Mapper
from transforms.integrations.subscription_provider_a_exports import (
    ExportMapper,
    ExportProblem,
    is_transactions_file,
    read_transactions,
)
from warehouse.integrations.target import SyncTarget

STATE_KEY = "revenuecat"
EXPORT_FILES = "export_files"  # state key: {object key: ETag it was read at}


def client(config: ValidConfig) -> RevenueCatClient:
    return RevenueCatClient(
        base_url=config.get("base_url"),
        api_key=config.get("api_key"),
        project_id=config.get("project_id"),
        requests_per_minute=config.get("requests_per_minute") or 480,
        export_bucket=config.get("export_bucket"),
        export_prefix=config.get("export_prefix") or "",
        export_region=config.get("export_region") or "us-east-1",
        export_endpoint_url=config.get("export_endpoint_url"),
        export_access_key_id=config.get("export_access_key_id"),
        export_secret_access_key=config.get("export_secret_access_key"),
    )


def _in_export_bucket(export: RevenueCatExportClient, failure: ClientError) -> ClientError:
    """The failure, saying that it was the export bucket (not the API key) that failed."""
    return error_for(
        failure.code,
        f"RevenueCat Scheduled Data Exports bucket {export.location}: {failure.message}",
        status=failure.status,
    )


def check(rc: RevenueCatClient) -> str:
    http = rc.http()
    what = f"listing the customers of project {rc.project_id}"
    response = http.request("GET", rc.url(rc.project_path("customers")), what=what, params={"limit": "1"})
    body = http.json(response, what=what)
    if not isinstance(body, dict) or not isinstance(body.get("items"), list):
        raise error_for("bad_response", f"{what}: not a RevenueCat list")
    found = "it has customers" if body["items"] else "it has no customers yet"
    summary = f"RevenueCat project {rc.project_id}: the key can list its customers; {found}"
    export = rc.exports()
    if export is not None:
        try:
            page = export.first_page(lambda _line: None)
        except ClientError as failure:
            raise _in_export_bucket(export, failure) from failure
        files = "files present" if page.get("Contents") else "no files yet"
        summary += f"; export bucket {export.location}: listing allowed, {files}"
    return summary


def sync_exports(export: RevenueCatExportClient, target: SyncTarget, mapper: ExportMapper, log: Log) -> list[str]:
    """Land the Transactions files not read yet (or changed since); the unreadable ones are
    returned (every readable file is landed first, and they are tried again next sync)."""

    def land(key: str, data: bytes) -> str:
        rows = read_transactions(key, data)
        mapped = mapper.transactions(rows)
        landed = target.land_events(mapped.events)
        reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(mapped.skipped.items()))
        return f"{len(rows)} row(s), {len(mapped.events)} event(s), {landed} new" + (
            f"; left out: {reasons}" if reasons else ""
        )

    read_as, broken = export.import_changed(
        dict(target.state.get(EXPORT_FILES, {})),
        wanted=is_transactions_file,
        kind="Transactions file",
        land=land,
        unreadable=ExportProblem,
        log=log,
    )
    target.state[EXPORT_FILES] = read_as
    return broken


_PRODUCTION = {"environment": "production"}


def sync(rc: RevenueCatClient, target: SyncTarget, config: ValidConfig, log: Log) -> None:
    """Every customer's subscriptions and purchases, landed one page of customers at a time (a
    failure mid-way keeps what was landed; the next sync re-walks and lands only the rest)."""
    export = rc.exports()
    broken: list[str] = []
    if export is not None:
        try:
            broken = sync_exports(export, target, ExportMapper(target.workspace_id, target.source, target.now), log)
        except ClientError as failure:
            raise _in_export_bucket(export, failure) from failure
    http = rc.http(log)
    mapper = Mapper(target.workspace_id, target.source, target.now)
    customers = 0
    calls_before, limited_before = http.calls, http.rate_limited
    project = rc.project_id
    for page in rc.pages(http, rc.project_path("customers"), what=f"listing customers of {project}", missing_ok=False):
        events = []
        for customer in page:
            customer_id = customer.get("id")
            if not isinstance(customer_id, str) or not customer_id:
                continue
            customers += 1
            subs = rc.items(
                http,
                rc.project_path("customers", customer_id, "subscriptions"),
                what=f"listing subscriptions of customer {customer_id}",
                params=_PRODUCTION,
            )
            pairs = []
            for sub in subs:
                if export is not None and sub.get("store") not in STORES_WITH_TRANSACTIONS:
                    continue  # the export's alone (module docstring)
                transactions = None
                if sub.get("store") in STORES_WITH_TRANSACTIONS and isinstance(sub.get("id"), str):
                    transactions = rc.items(
                        http,
                        rc.project_path("subscriptions", sub["id"], "transactions"),
                        what=f"listing transactions of subscription {sub['id']}",
                    )
                pairs.append((sub, transactions))
            purchases = rc.items(
                http,
                rc.project_path("customers", customer_id, "purchases"),
                what=f"listing purchases of customer {customer_id}",
                params=_PRODUCTION,
            )
            events.extend(mapper.customer(pairs, purchases))
        target.land_events(events)
    calls, limited = http.calls - calls_before, http.rate_limited - limited_before
    target.state[STATE_KEY] = {"customers": customers, "requests": calls, "rate_limited": limited}
    log(
        f"RevenueCat project {project}: {customers} customers, {calls} requests ({limited} answered 429), "
        f"{target.records} new events, {target.duplicates} already landed, {target.skipped_settled} settled"
    )
    if export is not None and broken:
        raise error_for(
            "bad_response",
            f"{len(broken)} unreadable file(s) in the RevenueCat Scheduled Data Exports bucket {export.location}: "
            + "; ".join(broken),
        )


CONNECTOR = Connector(type="subscription_provider_a", client=client, check=check, sync=sync)
