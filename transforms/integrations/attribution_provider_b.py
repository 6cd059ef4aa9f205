"""`attribution_provider_b` (AppsFlyer): the Master API's aggregate rows as spend rows.

What a sync asks for (AppsFlyer Master API, `GET /api/master-agg-data/v4/app/{app_id}`, reference
at dev.appsflyer.com/hc/reference/master_api_get and support article 213223166):

- `groupings=install_time,c,af_adset,af_ad,geo` (the API's own names: `c` is the campaign name,
  `af_adset` / `af_ad` the ad set and ad names, `geo` the country), `kpis=cost,installs`,
  `format=json`; `from`/`to` are `yyyy-mm-dd` and one request covers at most 31 days, so a
  longer window is asked for in pieces (`windows`).
- Days are UTC unless `timezone=preferred` is sent: we never send it, so a spend day is the same
  UTC day the Push API's `event_time` (UTC) puts an install on.
- Cost is in USD unless `currency=preferred` is sent, which returns the app's own currency
  (support article 213223166, "currency"). The answer does not name its currency, so the
  integration's `currency` option says which one it is (`report_currency`).

The JSON answer is a list of flat rows whose keys are the report's column labels ("Install Time",
"Campaign", "Adset", "Ad", "GEO", "Cost"; bruin-data/ingestr reads the same endpoint by
lowercasing the labels and mapping `c` -> campaign, `af_adset` -> adset). Keys are therefore
matched loosely (case, spaces, a "(c)"-style suffix), by label or by grouping name.

Spend is keyed by day x campaign x creative x country (`SPEND_KEY`), without the ad set: rows of
one ad in several ad sets are summed, never left for "last row wins" to drop. The creative is the
ad name (`af_ad`), which is what the Push API's `af_ad` carries for an install
(`transforms/ingest/attribution_provider_b.py`), so the payback report meets spend and installs on the same
strings. Installs in the report are not landed: the reports count installs from ingested install
events, one per user, and an aggregate count cannot be one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, timedelta
from typing import Any

import polars as pl

from transforms.ingest.validation import CURRENCIES
from transforms.reports.schemas import NONE_LABEL, SPEND_KEY, SPEND_SCHEMA

GROUPINGS = ("install_time", "c", "af_adset", "af_ad", "geo")
KPIS = ("cost", "installs")
# "Number of the days in the range: 1-31 days" (Master API `to` parameter).
MAX_RANGE_DAYS = 31
# The Master API's own currency when `currency=preferred` is not sent.
API_DEFAULT_CURRENCY = "USD"

# Column label (normalized) or grouping name -> what it is.
_ALIASES: Mapping[str, tuple[str, ...]] = {
    "day": ("install_time", "date"),
    "campaign": ("campaign", "c"),
    "creative": ("ad", "af_ad"),
    "country": ("geo", "country", "country_code"),
    "cost": ("cost", "total_cost"),
}
_SUFFIX = re.compile(r"\s*\([^)]*\)\s*$")


class ReportProblem(ValueError):
    """An answer that does not read as the report we asked for (the sync fails `bad_response`)."""


def window(today: date, lookback_days: int) -> list[date]:
    """The days a sync re-pulls: the last `lookback_days` days up to today (UTC), because
    AppsFlyer restates cost for up to 7 days (support article 360008850257)."""
    if lookback_days < 1:
        raise ValueError("lookback_days must be at least 1")
    return [today - timedelta(days=n) for n in range(lookback_days - 1, -1, -1)]


def windows(days: Sequence[date], size: int = MAX_RANGE_DAYS) -> list[tuple[date, date]]:
    """Consecutive `(from, to)` ranges of at most `size` days covering `days` (sorted, no gaps)."""
    ordered = sorted(set(days))
    return [(ordered[i], ordered[min(i + size, len(ordered)) - 1]) for i in range(0, len(ordered), size)]


def report_currency(configured: object) -> tuple[str, str | None]:
    """The currency the rows are in and the `currency` parameter that makes them so.

    USD is the API's default (no parameter); any other ISO 4217 code is the app's own currency
    as set in AppsFlyer, asked for with `currency=preferred`."""
    code = str(configured or API_DEFAULT_CURRENCY).strip().upper()
    if code not in CURRENCIES:
        raise ValueError(f"currency {configured!r} is not an ISO 4217 currency code")
    return code, (None if code == API_DEFAULT_CURRENCY else "preferred")


def _normalized(label: str) -> str:
    return _SUFFIX.sub("", label).strip().lower().replace("-", "").replace(" ", "_")


def _pick(row: Mapping[str, Any], name: str) -> Any:
    for alias in _ALIASES[name]:
        if alias in row:
            return row[alias]
    return None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _day(value: Any) -> date:
    text = _text(value)
    if text is None:
        raise ReportProblem("a row has no install_time")
    try:
        return date.fromisoformat(text[:10])
    except ValueError:
        raise ReportProblem(f"install_time {text!r} is not a yyyy-mm-dd date") from None


def _cost(value: Any) -> float:
    if value is None or value == "":
        return 0.0
    if isinstance(value, bool):
        raise ReportProblem(f"cost {value!r} is not a number")
    try:
        cost = float(str(value).replace(",", "")) if isinstance(value, str) else float(value)
    except (TypeError, ValueError):
        raise ReportProblem(f"cost {value!r} is not a number") from None
    if not math.isfinite(cost) or cost < 0:
        raise ReportProblem(f"cost {value!r} is not a spend amount")
    return cost


def records(body: object) -> list[dict[str, Any]]:
    """The rows of a JSON answer (a list of objects), keys normalized."""
    if not isinstance(body, list):
        raise ReportProblem(f"expected a JSON list of rows, got {type(body).__name__}")
    rows = []
    for row in body:
        if not isinstance(row, dict):
            raise ReportProblem(f"expected each row to be an object, got {type(row).__name__}")
        rows.append({_normalized(str(k)): v for k, v in row.items()})
    return rows


def spend_frame(
    rows: Iterable[Mapping[str, Any]], *, workspace_id: str, currency: str, days: Sequence[date]
) -> pl.DataFrame:
    """SPEND_SCHEMA rows from normalized report rows: cost summed per day x campaign x creative x
    country (over ad sets); rows without cost (organic, installs only) are left out. A row dated
    outside the days asked for means the answer is not the report we asked for."""
    asked = set(days)
    totals: dict[tuple[date, str, str, str], float] = {}
    for row in rows:
        day = _day(_pick(row, "day"))
        if day not in asked:
            raise ReportProblem(f"a row is dated {day}, outside the days asked for")
        cost = _cost(_pick(row, "cost"))
        if cost == 0:
            continue
        country = _text(_pick(row, "country"))
        key = (
            day,
            _text(_pick(row, "campaign")) or NONE_LABEL,
            _text(_pick(row, "creative")) or NONE_LABEL,
            country.upper() if country else NONE_LABEL,
        )
        totals[key] = totals.get(key, 0.0) + cost
    frame = pl.DataFrame(
        [
            {
                "workspace_id": workspace_id,
                "spend_date": day,
                "campaign": campaign,
                "creative": creative,
                "country": country,
                "spend": round(spend, 6),
                "currency": currency,
            }
            for (day, campaign, creative, country), spend in totals.items()
        ],
        schema=SPEND_SCHEMA,
    )
    return frame.sort(list(SPEND_KEY))
