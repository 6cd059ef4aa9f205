"""RevenueCat (subscription_provider_a): the REST API v2 client and the reconciliation sync.

The API has no "changed since" listing (`GET /v2/projects/{id}/customers` takes only `limit`,
`starting_after`, `search`), so every sync walks every customer: one page of customers, then per
customer its subscriptions, its App Store / Play Store subscriptions' transactions and its
one-time purchases (RevenueCat OpenAPI `openapi-spec/api-v2.yaml`, RevenueCat/docs bf39a9c).
Re-landing is harmless: event ids are deterministic (landing's claims) and the target's
high-water mark skips what was landed more than the claims' lifetime ago, so a re-run or a sync
40 days later lands nothing twice.

All of these endpoints are in the Customer Information rate-limit domain, "480 requests per
minute" per project: the client paces its calls evenly just under the configured rate
(`requests_per_minute`), so that in normal operation no 429 happens. On a 429 RevenueCat says how
long to wait in the body's `backoff_ms` (milliseconds); its docs say `Retry-After` carries the
same wait in seconds since August 2024 (RevenueCat/docs 5b41611c; before that, and in
design/integrations.md §1.2, milliseconds). `backoff_ms` is read first; a bare `Retry-After`
above 60 can only be milliseconds (the window is one minute), anything else is seconds.

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

import math
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar
from urllib.parse import parse_qsl, quote, urlsplit

import requests

from clients import s3
from clients.http import ProviderClient, ProviderHttp, RetryRules, body_text
from orchestration.syncs.connectors import Connector, Log
from transforms.integrations.errors import MAX_PROVIDER_TEXT, SyncFailure, truncate
from transforms.integrations.kinds import ValidConfig
from transforms.integrations.subscription_provider_a import STORES_WITH_TRANSACTIONS, Mapper
from transforms.integrations.subscription_provider_a_exports import (
    ExportMapper,
    ExportProblem,
    is_transactions_file,
    read_transactions,
)
from warehouse.integrations.target import SyncTarget

PAGE_SIZE = 100
# Paced this much under the configured rate: our clock and RevenueCat's see a request at slightly
# different times (network jitter), and a rolling minute at exactly the limit would catch one.
PACING_MARGIN = 0.97
# RevenueCat's window is one minute: a longer wait cannot be meant in seconds.
_WINDOW_S = 60.0
STATE_KEY = "revenuecat"
EXPORT_FILES = "export_files"  # state key: {object key: ETag it was read at}


def revenuecat_retry_after(response: requests.Response) -> float | None:
    """The wait RevenueCat asks for, in seconds: the body's `backoff_ms`, else `Retry-After`."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, Mapping):
        backoff = body.get("backoff_ms")
        if isinstance(backoff, int | float) and not isinstance(backoff, bool) and math.isfinite(backoff):
            return max(0.0, float(backoff) / 1000.0)
    value = response.headers.get("Retry-After", "").strip()
    try:
        number = float(value)
    except ValueError:
        return None
    if not math.isfinite(number) or number < 0:
        return None
    return number / 1000.0 if number > _WINDOW_S else number


def revenuecat_error_text(response: requests.Response) -> str:
    """RevenueCat's error object: its `message`, with its `type` (e.g. authentication_error)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, Mapping) and isinstance(body.get("message"), str):
        kind = body.get("type")
        text = f"{body['message']} ({kind})" if isinstance(kind, str) else body["message"]
        return truncate(text, MAX_PROVIDER_TEXT)
    return body_text(response)


class RevenueCatExportClient(s3.S3ExportFolder):
    """The bucket folder RevenueCat's Scheduled Data Exports deliver to."""

    PROVIDER: ClassVar[str] = "RevenueCat export bucket"


class RevenueCatClient(ProviderClient):
    PROVIDER: ClassVar[str] = "RevenueCat"
    SECRET_FIELDS: ClassVar[frozenset[str]] = frozenset({"api_key", "export_access_key_id", "export_secret_access_key"})

    api_key: str
    project_id: str
    requests_per_minute: int = 480
    export_bucket: str | None = None
    export_prefix: str = ""
    export_region: str = "us-east-1"
    export_endpoint_url: str | None = None
    export_access_key_id: str | None = None
    export_secret_access_key: str | None = None

    def exports(self) -> RevenueCatExportClient | None:
        """The export bucket's client, or None when no export is configured."""
        if not (self.export_bucket and self.export_access_key_id and self.export_secret_access_key):
            return None
        return RevenueCatExportClient(
            base_url=self.export_endpoint_url or s3.AWS_S3,
            bucket=self.export_bucket,
            prefix=self.export_prefix,
            region=self.export_region,
            access_key_id=self.export_access_key_id,
            secret_access_key=self.export_secret_access_key,
            connect_timeout_s=self.connect_timeout_s,
            read_timeout_s=self.read_timeout_s,
        )

    def rules(self) -> RetryRules:
        # 423 (a resource locked by a concurrent change) is retryable with `backoff_ms` too.
        return RetryRules(
            retry_after=revenuecat_retry_after,
            error_text=revenuecat_error_text,
            retry_statuses=frozenset({423, 429, 500, 502, 503, 504}),
        )

    def per_minute(self) -> float | None:
        return self.requests_per_minute * PACING_MARGIN

    def _authorize(self, session: requests.Session) -> None:
        session.headers["Authorization"] = f"Bearer {self.api_key}"
        session.headers["Accept"] = "application/json"

    def project_path(self, *parts: str) -> str:
        return "/".join(["/v2/projects", quote(self.project_id, safe=""), *(quote(p, safe="") for p in parts)])

    def pages(
        self, http: ProviderHttp, path: str, *, what: str, params: Mapping[str, str] | None = None, missing_ok: bool
    ) -> Iterator[list[dict[str, Any]]]:
        """A list endpoint's pages, following `next_page` (a path on the API's host) until it is
        null. With `missing_ok`, a 404 is an empty list (a customer deleted during the sync)."""
        url: str | None = self.url(path)
        query: dict[str, str] = {"limit": str(PAGE_SIZE), **(params or {})}
        seen: set[str] = set()
        while url is not None:
            accept = (200, 404) if missing_ok else (200,)
            response = http.request("GET", url, what=what, accept=accept, params=query)
            if response.status_code == 404:
                return
            body = http.json(response, what=what)
            items = body.get("items") if isinstance(body, dict) else None
            if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
                raise SyncFailure("bad_response", f"{what}: not a RevenueCat list")
            yield items
            next_page = body.get("next_page")
            if not next_page:
                return
            if not isinstance(next_page, str) or next_page in seen:
                raise SyncFailure("bad_response", f"{what}: next_page {next_page!r} does not move on")
            seen.add(next_page)
            url = self.url(urlsplit(next_page).path)
            # `next_page` carries the cursor; the page size and filters are ours to repeat.
            query = {**query, **dict(parse_qsl(urlsplit(next_page).query))}

    def items(
        self, http: ProviderHttp, path: str, *, what: str, params: Mapping[str, str] | None = None
    ) -> list[dict[str, Any]]:
        return [item for page in self.pages(http, path, what=what, params=params, missing_ok=True) for item in page]


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


def _in_export_bucket(export: RevenueCatExportClient, failure: SyncFailure) -> SyncFailure:
    """The failure, saying that it was the export bucket (not the API key) that failed."""
    return SyncFailure(
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
        raise SyncFailure("bad_response", f"{what}: not a RevenueCat list")
    found = "it has customers" if body["items"] else "it has no customers yet"
    summary = f"RevenueCat project {rc.project_id}: the key can list its customers; {found}"
    export = rc.exports()
    if export is not None:
        try:
            page = export.first_page(lambda _line: None)
        except SyncFailure as failure:
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
        except SyncFailure as failure:
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
        raise SyncFailure(
            "bad_response",
            f"{len(broken)} unreadable file(s) in the RevenueCat Scheduled Data Exports bucket {export.location}: "
            + "; ".join(broken),
        )


CONNECTOR = Connector(type="subscription_provider_a", client=client, check=check, sync=sync)
