"""Reading the dashboard's report pages in Flask-client tests: v1's answer to compare with, and
what a page carries (its chart data block, a table's cells, its text, a CSV), formatted as the
pages format figures."""

from __future__ import annotations

import csv
import html
import io
import json
import re
from typing import Any

from flask.testing import FlaskClient

from tests.support import bearer


def v1(client: FlaskClient, path: str, key: str, query: dict[str, Any]) -> Any:
    response = client.get(f"/v1/reports/{path}", query_string=query, headers=bearer(key))
    assert response.status_code == 200, response.json
    return response.json


def data_block(page: str, block_id: str) -> Any:
    found = re.search(rf'<script type="application/json" id="{block_id}">(.*?)</script>', page, re.S)
    assert found, f"no #{block_id} data block"
    return json.loads(found.group(1))


def table_rows(page: str, table_id: str) -> list[list[str]]:
    """The body rows of a table as the text of their cells."""
    found = re.search(rf'<table[^>]*id="{table_id}".*?<tbody>(.*?)</tbody>', page, re.S)
    assert found, f"no #{table_id}"
    rows = re.findall(r"<tr>(.*?)</tr>", found.group(1), re.S)
    return [[html.unescape(c).strip() for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", r, re.S)] for r in rows]


def text(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def csv_rows(body: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(body)))


def money(value: float | None) -> str:
    return "—" if value is None else f"{value:,.2f}"


def percent(value: float) -> str:
    return f"{round(value * 100, 2):.2f} %"


def cell(value: Any) -> str:
    return "" if value is None else str(value)
