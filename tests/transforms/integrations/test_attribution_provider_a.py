"""Adjust report rows to spend rows: names kept, countries normalised, money summed, bad rows refused."""

from __future__ import annotations

from datetime import date

import pytest

from transforms.integrations.attribution_provider_a import (
    ReportProblem,
    chunks,
    currency_of,
    report_params,
    report_rows,
    spend_frame,
    window,
)
from transforms.reports.schemas import SPEND_SCHEMA

DAY = date(2026, 11, 20)


def row(**values: object) -> dict[str, object]:
    base: dict[str, object] = {
        "attr_dependency": {},
        "day": "2026-11-20",
        "campaign": "Spring Sale (12345)",
        "creative": "Video 1 (777)",
        "country_code": "US",
        "cost": "12.50",
        "installs": "4",
    }
    base.update(values)
    return base


def frame(*rows: dict[str, object]) -> list[dict[str, object]]:
    spend, _ = spend_frame(list(rows), workspace_id="ws_1", currency="EUR", days=[DAY])
    return spend.to_dicts()


def test_names_are_kept_exactly_and_the_row_has_the_spend_schema() -> None:
    spend, summary = spend_frame([row()], workspace_id="ws_1", currency="EUR", days=[DAY])
    assert spend.schema == SPEND_SCHEMA
    assert spend.to_dicts() == [
        {
            "workspace_id": "ws_1",
            "spend_date": DAY,
            "campaign": "Spring Sale (12345)",
            "creative": "Video 1 (777)",
            "country": "US",
            "spend": 12.5,
            "currency": "EUR",
        }
    ]
    assert (summary.rows, summary.spend_rows, summary.installs, summary.cost) == (1, 1, 4, 12.5)


def test_countries_are_uppercased_and_unknown_ones_are_null_with_their_spend_summed() -> None:
    rows = frame(
        row(country_code="de"),
        row(country_code="unknown", cost="1"),
        row(country_code="zz", cost=2),
        row(country_code=None, cost="3.5"),
    )
    assert {r["country"]: r["spend"] for r in rows} == {"DE": 12.5, None: 6.5}


def test_numbers_or_strings_and_rows_without_spend() -> None:
    rows = frame(row(cost=3, installs=2), row(creative="Organic", cost="0.0", installs="90"))
    assert [(r["creative"], r["spend"]) for r in rows] == [("Video 1 (777)", 3.0)]
    _, summary = spend_frame([row(cost="0", installs="90")], workspace_id="w", currency="USD", days=[DAY])
    assert summary.installs == 90 and summary.spend_rows == 0


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        (row(cost="n/a"), "cost: 'n/a'"),
        (row(cost=None), "cost: None"),
        (row(day="20/11/2026"), "day: '20/11/2026'"),
        (row(day="2026-11-19"), "2026-11-19, outside the days asked for"),
    ],
)
def test_rows_that_cannot_be_read_are_refused(bad: dict[str, object], words: str) -> None:
    with pytest.raises(ReportProblem, match=words.replace("(", r"\(")):
        frame(bad)


def test_an_empty_report() -> None:
    spend, summary = spend_frame([], workspace_id="w", currency="USD", days=[DAY])
    assert spend.height == 0 and spend.schema == SPEND_SCHEMA and summary.rows == 0


def test_report_rows_wants_the_documented_shape() -> None:
    assert report_rows({"rows": [row()], "totals": {}, "warnings": []}) == [row()]
    for body in ({"totals": {}}, [row()], {"rows": ["x"]}):
        with pytest.raises(ReportProblem):
            report_rows(body)


def test_the_window_ends_today_and_goes_in_chunks() -> None:
    days = window(DAY, 14)
    assert days[0] == date(2026, 11, 7) and days[-1] == DAY and len(days) == 14
    assert [len(c) for c in chunks(days, 3)] == [3, 3, 3, 3, 2]
    assert [d for c in chunks(days, 3) for d in c] == days


def test_report_params() -> None:
    params = report_params([date(2026, 11, 18), DAY], currency="EUR", app_token="abc")
    assert params == {
        "dimensions": "day,campaign,creative,country_code",
        "metrics": "cost,installs",
        "date_period": "2026-11-18:2026-11-20",
        "attribution_types": "click,engaged_ad",
        "currency": "EUR",
        "utc_offset": "+00:00",
        "format_dates": "false",
        "app_token__in": "abc",
    }
    assert "app_token__in" not in report_params([DAY], currency="USD")


def test_currency() -> None:
    assert currency_of(None) == "USD"
    assert currency_of("eur") == "EUR"
    with pytest.raises(ValueError, match="ISO 4217"):
        currency_of("euro")
