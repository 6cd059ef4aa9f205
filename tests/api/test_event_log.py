"""GET /v1/events: the workspace's event log, newest first, paged after an id, the last 30 days,
test samples and other workspaces left out; errors in the v1 shape (issue 36 part 4, preview)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from flask.testing import FlaskClient

from tests.support import bearer
from warehouse.bootstrap import bootstrap
from warehouse.db import Database, utcnow
from warehouse.webhooks.outbox import emit_event, emit_test_event
from warehouse.webhooks.tables import webhook_events

TYPES = ("action.created", "action.approved", "action.created", "integration.error", "action.created")


def read(client: FlaskClient, workspace: dict[str, Any], **query: Any) -> Any:
    return client.get("/v1/events", query_string=query, headers=bearer(workspace["api_key_read_only"]))


@pytest.mark.both_backends(reason="the page's cursor compares (created_at, id) per dialect")
def test_the_log_pages_newest_first_and_leaves_out_samples_old_events_and_other_workspaces(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    ws, now = workspace["workspace_id"], utcnow()
    with db.write() as conn:
        ids = [
            emit_event(conn, workspace_id=ws, event_type=t, data={"n": i}, now=now - timedelta(minutes=10 - i))
            for i, t in enumerate(TYPES)
        ]  # fmt: skip
        emit_event(conn, workspace_id=ws, event_type="action.created", data={"n": -1}, now=now - timedelta(days=31))
        emit_test_event(conn, workspace_id=ws, event_type="action.created")
        other = bootstrap(conn, name="Another")["workspace_id"]
        emit_event(conn, workspace_id=other, event_type="action.created", data={"n": 99}, now=now)
        frozen = dict(conn.execute(sa.select(webhook_events.c.id, webhook_events.c.body)).all())

    seen: list[dict[str, Any]] = []
    cursor: dict[str, Any] = {}
    for expected_more in (True, True, False):
        page = read(client, workspace, limit=2, **cursor)
        assert page.status_code == 200, page.json
        assert page.json["has_more"] is expected_more
        seen += page.json["events"]
        cursor = {"starting_after": page.json["events"][-1]["id"]}
    assert [e["id"] for e in seen] == ids[::-1]
    assert all(e == json.loads(frozen[e["id"]]) for e in seen)  # the envelopes the webhooks carry

    created = read(client, workspace, type="action.created")
    assert [e["id"] for e in created.json["events"]] == [ids[4], ids[2], ids[0]]
    since = read(client, workspace, since=seen[1]["created_at"])
    assert [e["id"] for e in since.json["events"]] == [ids[4], ids[3]]


def test_bad_queries_are_400_naming_the_parameter_and_a_key_is_required(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    for query, field in (
        ({"type": "action.exploded"}, "type"),
        ({"since": "2026-11-01T00:00:00"}, "since"),  # no offset: which day it is depends on the reader
        ({"limit": 0}, "limit"),
        ({"limit": 101}, "limit"),
        ({"starting_after": "evt_nowhere"}, "starting_after"),
    ):
        answer = read(client, workspace, **query)
        assert answer.status_code == 400, (query, answer.json)
        assert field in json.dumps(answer.json), (query, answer.json)
    assert client.get("/v1/events").status_code == 401
