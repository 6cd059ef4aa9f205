"""AppsFlyer Master API rows to spend rows: pure mapping."""

from datetime import date

import pytest

from transforms.integrations import attribution_provider_b as af


def test_the_window_ends_today_and_is_cut_in_31_day_pieces() -> None:
    days = af.window(date(2026, 3, 10), 7)
    assert days[0] == date(2026, 3, 4) and days[-1] == date(2026, 3, 10) and len(days) == 7
    pieces = af.windows(af.window(date(2026, 3, 31), 63))
    assert pieces == [
        (date(2026, 1, 28), date(2026, 2, 27)),
        (date(2026, 2, 28), date(2026, 3, 30)),
        (date(2026, 3, 31), date(2026, 3, 31)),
    ]
    assert af.windows([]) == []


def test_labels_and_grouping_names_both_read() -> None:
    """The JSON keys are the report's labels; some clients see the grouping names: both work."""
    rows = af.records(
        [
            {
                "Install Time": "2026-03-01",
                "Campaign (c)": "spring",
                "Adset": "a",
                "Ad": "v1",
                "GEO": "us",
                "Cost": "1,250.5",
            },
            {"install_time": "2026-03-01", "c": "spring", "af_adset": "b", "af_ad": "v1", "geo": "US", "cost": 0.5},
        ]
    )
    frame = af.spend_frame(rows, workspace_id="ws_1", currency="USD", days=[date(2026, 3, 1)])
    assert frame.to_dicts() == [
        {
            "workspace_id": "ws_1",
            "spend_date": date(2026, 3, 1),
            "campaign": "spring",
            "creative": "v1",
            "country": "US",
            "spend": 1251.0,
            "currency": "USD",
        }
    ]


def test_missing_levels_are_none_and_zero_cost_rows_are_left_out() -> None:
    rows = af.records(
        [
            {"Install Time": "2026-03-01", "Campaign": "c1", "Cost": 2},
            {"Install Time": "2026-03-01", "Campaign": "organic", "Installs": 50, "Cost": 0},
            {"Install Time": "2026-03-01", "Campaign": "x", "Installs": 5},
        ]
    )
    frame = af.spend_frame(rows, workspace_id="ws", currency="EUR", days=[date(2026, 3, 1)])
    assert frame.select("campaign", "creative", "country", "spend", "currency").rows() == [
        ("c1", "(none)", "(none)", 2.0, "EUR")
    ]


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"data": []}, "list of rows"),
        (["row"], "object"),
        ([{"Install Time": "yesterday", "Cost": 1}], "yyyy-mm-dd"),
        ([{"Campaign": "c", "Cost": 1}], "no install_time"),
        ([{"Install Time": "2026-03-01", "Cost": "lots"}], "not a number"),
        ([{"Install Time": "2026-03-01", "Cost": -3}], "not a spend amount"),
        ([{"Install Time": "2026-02-01", "Cost": 3}], "outside the days"),
    ],
)
def test_an_answer_that_is_not_the_report_is_refused(body: object, problem: str) -> None:
    with pytest.raises(af.ReportProblem, match=problem):
        af.spend_frame(af.records(body), workspace_id="ws", currency="USD", days=[date(2026, 3, 1)])


def test_report_currency() -> None:
    assert af.report_currency(None) == ("USD", None)
    assert af.report_currency("usd") == ("USD", None)
    assert af.report_currency("GBP") == ("GBP", "preferred")
    for bad in ("XAU", "EURO"):
        with pytest.raises(ValueError, match="not an ISO 4217"):
            af.report_currency(bad)
