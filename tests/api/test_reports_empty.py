"""The reports before the first refresh: authenticated, empty, not an error."""

from typing import Any

import pytest
from flask.testing import FlaskClient

from tests.support import bearer

PAYBACK = "/v1/reports/payback"
RANGE = {"start_date": "2026-06-01", "end_date": "2026-07-31"}


def get(client: FlaskClient, path: str, key: str, **query: Any) -> Any:
    return client.get(path, query_string=query, headers=bearer(key))


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: reports/serving.py")
def test_reports_need_a_key_and_are_empty_before_the_first_refresh(
    client: FlaskClient, workspace: dict[str, Any]
) -> None:
    assert client.get(PAYBACK, query_string=RANGE).status_code == 401
    body = get(client, PAYBACK, workspace["api_key_read_write"], **RANGE).json
    assert body == {"data": [], "meta": {"currency": "USD", "generated_at": None, "cohort_window_days": 30}}
    body = get(client, "/v1/reports/subscriptions", workspace["api_key_read_only"], **RANGE).json
    assert body == {
        "data": [],
        "meta": {"currency": "USD", "generated_at": None, "interval": "day", "group_by": "none"},
    }
