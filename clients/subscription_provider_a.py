"""subscription_provider_a: RevenueCat's REST API v2 (customers, subscriptions, purchases) and its export bucket.

All of these endpoints are in the Customer Information rate-limit domain, "480 requests per
minute" per project: the client paces its calls evenly just under the configured rate
(`requests_per_minute`), so that in normal operation no 429 happens. On a 429 RevenueCat says how
long to wait in the body's `backoff_ms` (milliseconds); its docs say `Retry-After` carries the
same wait in seconds since August 2024 (RevenueCat/docs 5b41611c; before that, and in
design/integrations.md §1.2, milliseconds). `backoff_ms` is read first; a bare `Retry-After`
above 60 can only be milliseconds (the window is one minute), anything else is seconds. The
reconciliation sync is `orchestration.syncs.connectors.subscription_provider_a`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar
from urllib.parse import parse_qsl, quote, urlsplit

import requests

from clients import s3
from clients.http import ProviderClient, ProviderHttp, RetryRules, body_text
from transforms.client_errors import error_for
from transforms.integrations.errors import MAX_PROVIDER_TEXT, truncate

PAGE_SIZE = 100
# Paced this much under the configured rate: our clock and RevenueCat's see a request at slightly
# different times (network jitter), and a rolling minute at exactly the limit would catch one.
PACING_MARGIN = 0.97
# RevenueCat's window is one minute: a longer wait cannot be meant in seconds.
_WINDOW_S = 60.0


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
                raise error_for("bad_response", f"{what}: not a RevenueCat list")
            yield items
            next_page = body.get("next_page")
            if not next_page:
                return
            if not isinstance(next_page, str) or next_page in seen:
                raise error_for("bad_response", f"{what}: next_page {next_page!r} does not move on")
            seen.add(next_page)
            url = self.url(urlsplit(next_page).path)
            # `next_page` carries the cursor; the page size and filters are ours to repeat.
            query = {**query, **dict(parse_qsl(urlsplit(next_page).query))}

    def items(
        self, http: ProviderHttp, path: str, *, what: str, params: Mapping[str, str] | None = None
    ) -> list[dict[str, Any]]:
        return [item for page in self.pages(http, path, what=what, params=params, missing_ok=True) for item in page]
