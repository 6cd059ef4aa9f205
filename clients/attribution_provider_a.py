"""attribution_provider_a: Adjust's Report Service API (daily cost and installs), with a Bearer API token.

The HTTP rules (https://help.adjust.com/en/article/reports-endpoint): 200 `{rows, totals,
warnings}`, 204 when there is nothing, 401/403 for the token, 429 beyond 50 simultaneous
requests (bare: no documented `Retry-After`, honoured in seconds if one comes), 503, and 504
when a query runs too long. 429/503/504 are retried with backoff by `ProviderHttp`. The sync is
`orchestration.syncs.connectors.attribution_provider_a`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date
from typing import Any, ClassVar

import requests

from clients.http import ProviderClient, RetryRules
from transforms.client_errors import error_for
from transforms.integrations import attribution_provider_a as adjust

REPORT_PATH = "reports-service/report"
Log = Callable[[str], None]


class AdjustClient(ProviderClient):
    """Adjust's Report Service API with a Bearer API token."""

    PROVIDER: ClassVar[str] = "Adjust"
    SECRET_FIELDS: ClassVar[frozenset[str]] = frozenset({"api_token"})

    api_token: str
    app_token: str | None = None
    currency: str = adjust.DEFAULT_CURRENCY
    lookback_days: int = 14
    chunk_days: int = adjust.CHUNK_DAYS
    # First wait after a bare 429 or a 5xx (doubles per attempt): 1+2+4+8 s over five attempts
    # lets a burst of other clients' requests drain.
    backoff_s: float = 1.0

    def rules(self) -> RetryRules:
        return RetryRules(backoff_s=self.backoff_s)

    def _authorize(self, session: requests.Session) -> None:
        session.headers["Authorization"] = f"Bearer {self.api_token}"
        session.headers["Accept"] = "application/json"

    def report(
        self,
        days: Sequence[date],
        log: Log | None = None,
        *,
        dimensions: Sequence[str] = adjust.DIMENSIONS,
        metrics: Sequence[str] = adjust.METRICS,
    ) -> list[Any]:
        """The report's rows for `days` (one request); [] for a 204."""
        http = self.http(log)
        what = f"Adjust report {adjust.date_period(days)}"
        params = adjust.report_params(
            days, currency=self.currency, app_token=self.app_token, dimensions=dimensions, metrics=metrics
        )
        response = http.request("GET", self.url(REPORT_PATH), what=what, accept=(200, 204), params=params)
        if response.status_code == 204:
            return []
        try:
            return adjust.report_rows(http.json(response, what=what))
        except adjust.ReportProblem as exc:
            raise error_for("bad_response", f"{what}: {exc}") from exc
