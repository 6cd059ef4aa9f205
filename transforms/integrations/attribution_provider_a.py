"""`attribution_provider_a` (Adjust): Report Service rows as FloKit spend rows, the connector's pure half.

What the connector asks for, and why (https://dev.adjust.com/en/api/rs-api/reports, the
`adjust/dev-docs` source of that page, and design/integrations.md §1.4):

- `dimensions=day,campaign,creative,country_code`. `campaign` and `creative` are the
  *attribution* dimensions (tracker sub-levels 1 and 3), the same names the callbacks'
  `{campaign_name}` / `{creative_name}` placeholders carry (`transforms.ingest.attribution`), so
  spend meets installs cell by cell in the payback report. `adgroup` (sub-level 2) is not asked
  for: spend rows have no adgroup, and Adjust sums over it for us instead of sending one row per
  adgroup that we would sum here. `country_code` is "2-character value ISO 3166" (`country` is
  the country's English name).
- `metrics=cost,installs`. `cost` is Adjust's "Ad spend": the figure of the account's ad spend
  source (network, attribution, or mixed), i.e. the column the customer sees in Datascape.
  `network_cost` only holds what networks' APIs report and is 0 for partners that send cost on
  the engagement (https://help.adjust.com/en/article/how-ad-spend-source-affects-your-data).
  `installs` is read for the sync's log only: installs reach FloKit as callbacks.
- `attribution_types=click,engaged_ad`, pinned: Adjust's API-side default changed to include
  impressions (ingestr pins the same, `pkg/source/adjust/adjust.go`), and a silent change of
  what is attributed would move every campaign's figures.
- `currency=<config currency>`: "Currency used for conversion of money related metrics"; the
  rows are labelled with it and the reports convert from it at the ECB rate of the day.
- `utc_offset=+00:00`: report days are UTC days, as the installs' cohort days are (a
  callback's `created_at` is a Unix time, and the reports date an install by its UTC day); the
  account's own timezone would shift spend a day against the installs it bought.
- `format_dates=false`: date dimensions in ISO format.
- `date_period=YYYY-MM-DD:YYYY-MM-DD` (absolute, inclusive), and `app_token__in` when the
  integration is limited to one app.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

import polars as pl

from transforms.ingest.validation import valid_country
from transforms.reports.schemas import SPEND_KEY, SPEND_SCHEMA

DIMENSIONS = ("day", "campaign", "creative", "country_code")
METRICS = ("cost", "installs")
ATTRIBUTION_TYPES = "click,engaged_ad"
# Days per report request: a chunk's rows are parsed, written and dropped before the next one
# is asked for, so memory follows the chunk, not the window (90 days of 50 campaigns x 20
# creatives x 30 countries is 2.7 M rows; 3 days of them is 90 000).
CHUNK_DAYS = 3
DEFAULT_CURRENCY = "USD"
_CURRENCY = re.compile(r"^[A-Z]{3}$")


class ReportProblem(ValueError):
    """A report the connector cannot read (the client turns it into `bad_response`)."""


@dataclass(frozen=True)
class ReportSummary:
    """What one report answered, for the sync's log: rows read, spend rows kept, installs."""

    rows: int = 0
    spend_rows: int = 0
    installs: int = 0
    cost: float = 0.0

    def __add__(self, other: ReportSummary) -> ReportSummary:
        return ReportSummary(
            self.rows + other.rows,
            self.spend_rows + other.spend_rows,
            self.installs + other.installs,
            self.cost + other.cost,
        )


def window(today: date, lookback_days: int) -> list[date]:
    """The days every sync re-pulls: `lookback_days` days ending today (UTC), oldest first.
    Network spend restates for 14 days (design/integrations.md §1.4), so the default is 14."""
    return [today - timedelta(days=n) for n in range(lookback_days - 1, -1, -1)]


def chunks(days: Sequence[date], size: int = CHUNK_DAYS) -> Iterator[list[date]]:
    """Consecutive runs of at most `size` days (each one report request)."""
    ordered = sorted(days)
    for i in range(0, len(ordered), size):
        yield ordered[i : i + size]


def date_period(days: Sequence[date]) -> str:
    return f"{min(days).isoformat()}:{max(days).isoformat()}"


def currency_of(raw: object) -> str:
    """The reporting currency asked of Adjust (ISO 4217, uppercase)."""
    code = str(raw or DEFAULT_CURRENCY).strip().upper()
    if not _CURRENCY.match(code):
        raise ValueError(f"currency must be an ISO 4217 code such as USD, not {raw!r}")
    return code


def report_params(
    days: Sequence[date],
    *,
    currency: str,
    app_token: str | None = None,
    dimensions: Sequence[str] = DIMENSIONS,
    metrics: Sequence[str] = METRICS,
) -> dict[str, str]:
    params = {
        "dimensions": ",".join(dimensions),
        "metrics": ",".join(metrics),
        "date_period": date_period(days),
        "attribution_types": ATTRIBUTION_TYPES,
        "currency": currency,
        "utc_offset": "+00:00",
        "format_dates": "false",
    }
    if app_token:
        params["app_token__in"] = app_token
    return params


def report_rows(body: object) -> list[Mapping[str, Any]]:
    """The `rows` of a report answer (`{rows, totals, warnings}`)."""
    if not isinstance(body, Mapping) or not isinstance(body.get("rows"), list):
        raise ReportProblem("the report has no `rows` list")
    rows = body["rows"]
    if not all(isinstance(row, Mapping) for row in rows):
        raise ReportProblem("a report row is not an object")
    return rows


_RAW = {
    "day": pl.String(),
    "campaign": pl.String(),
    "creative": pl.String(),
    "country_code": pl.String(),
    "cost": pl.String(),
    "installs": pl.String(),
}


def spend_frame(
    rows: Sequence[Mapping[str, Any]], *, workspace_id: str, currency: str, days: Sequence[date]
) -> tuple[pl.DataFrame, ReportSummary]:
    """The report's rows as SPEND_SCHEMA rows, one per (day, campaign, creative, country).

    Campaign and creative are kept exactly as the report names them (the callbacks carry the
    same strings). A country that is not an assigned ISO 3166-1 code (Adjust's `unknown`, `zz`)
    is null, which the reports label "(none)" as they do for installs without a country; its
    spend is kept, and rows that fall together that way are summed. Rows without spend (an
    organic row has installs only) are left out: a day is replaced whole, so nothing is lost.
    Metric values arrive as strings ("1000") or numbers; anything else is a `ReportProblem`."""
    # Polars reads the dicts in Rust (numbers become their decimal strings): ~0.4 µs a row,
    # where a Python loop over 2.7 M rows would take most of a minute.
    raw = pl.from_dicts(rows, schema=_RAW, strict=False) if rows else pl.DataFrame(schema=_RAW)
    if raw.height == 0:
        return SPEND_SCHEMA.to_frame(), ReportSummary()
    parsed = raw.select(
        pl.col("day").str.strptime(pl.Date, "%Y-%m-%d", strict=False).alias("spend_date"),
        pl.col("campaign").str.strip_chars(),
        pl.col("creative").str.strip_chars(),
        pl.col("country_code").str.strip_chars().str.to_uppercase().alias("country"),
        pl.col("cost").cast(pl.Float64, strict=False).alias("spend"),
        pl.col("installs").cast(pl.Float64, strict=False).alias("installs"),
        pl.col("day").alias("_day"),
        pl.col("cost").alias("_cost"),
    )
    bad_day = parsed.filter(pl.col("spend_date").is_null())
    if bad_day.height:
        raise ReportProblem(f"a report row has no readable day: {bad_day.get_column('_day')[0]!r}")
    bad_cost = parsed.filter(pl.col("spend").is_null() | ~pl.col("spend").is_finite())
    if bad_cost.height:
        raise ReportProblem(f"a report row has no readable cost: {bad_cost.get_column('_cost')[0]!r}")
    outside = parsed.filter(~pl.col("spend_date").is_in(list(days)))
    if outside.height:
        first = outside.get_column("spend_date")[0]
        raise ReportProblem(f"the report has rows for {first}, outside the days asked for")
    countries = parsed.get_column("country").unique().drop_nulls().to_list()
    known = [c for c in countries if valid_country(c)]
    spend = (
        parsed.filter(pl.col("spend") != 0)
        .with_columns(pl.when(pl.col("country").is_in(known)).then(pl.col("country")).alias("country"))
        .group_by("spend_date", "campaign", "creative", "country")
        .agg(pl.col("spend").sum())
        .select(
            pl.lit(workspace_id).alias("workspace_id"),
            "spend_date",
            "campaign",
            "creative",
            "country",
            "spend",
            pl.lit(currency).alias("currency"),
        )
        .cast(dict(SPEND_SCHEMA))  # type: ignore[arg-type]
        .sort(list(SPEND_KEY), nulls_last=True)
    )
    summary = ReportSummary(
        rows=raw.height,
        spend_rows=spend.height,
        installs=int(parsed.get_column("installs").fill_null(0).sum()),
        cost=float(parsed.get_column("spend").sum()),
    )
    return spend, summary
