"""/v1/experiments and the paywall config read under experiments: create, read, change, start,
stop and ship; sticky exposures; audiences; ETag; errors in the v1 shape."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest
import sqlalchemy as sa
from flask.testing import FlaskClient

from api.app import create_app
from api.gateway.experiments import flush_exposures
from tests.support import bearer, run_together
from tests.support.paywalls import document
from transforms.experiments.assignment import Weighted
from transforms.experiments.serving import first_variant, settled_draw
from transforms.webhooks import payloads
from warehouse import audit
from warehouse.db import Database, utcnow
from warehouse.experiments import repository
from warehouse.experiments.tables import experiment_exposures
from warehouse.paywalls import configs
from warehouse.settings import Settings
from warehouse.webhooks.tables import webhook_events

CONFIG = "/api/paywall/config"


@pytest.fixture
def client(settings: Settings) -> FlaskClient:
    """Workers keep each paywall's experiments `config_cache_s` (1 s by default): a change reaches
    every worker within it. These tests read right after each change, so nothing is kept."""
    return create_app(replace(settings, config_cache_s=0)).test_client()


def rw(workspace: dict[str, Any]) -> dict[str, str]:
    return bearer(workspace["api_key_read_write"])


def ro(workspace: dict[str, Any]) -> dict[str, str]:
    return bearer(workspace["api_key_read_only"])


def publish(db: Database, app_id: str, weights: list[float], *, active: bool = False) -> int:
    with db.write() as conn:
        return configs.publish(
            conn, app_id=app_id, paywall_id="onboarding", document=document(weights, active), actor="ops"
        ).version


def create(client: FlaskClient, workspace: dict[str, Any], **body: Any) -> Any:
    payload = {
        "app_id": workspace["app_id"], "paywall_id": "onboarding", "name": "Annual first",
        "variants": [{"variant_id": "v0", "weight": 50}, {"variant_id": "v1", "weight": 50}],
        "primary_metric": "paid_conversion_rate",
    } | body  # fmt: skip
    return client.post("/v1/experiments", json=payload, headers=rw(workspace))


def started(client: FlaskClient, workspace: dict[str, Any], **body: Any) -> dict[str, Any]:
    made = create(client, workspace, **body)
    assert made.status_code == 201, made.json
    experiment_id = made.json["experiment"]["id"]
    response = client.post(f"/v1/experiments/{experiment_id}/start", headers=rw(workspace))
    assert response.status_code == 200, response.json
    return response.json["experiment"]


def config(client: FlaskClient, app_id: str, user: str, **headers: str) -> Any:
    return client.get(
        CONFIG, query_string={"app_id": app_id, "paywall_id": "onboarding"}, headers={"x-user-id": user, **headers}
    )


def exposures(client: FlaskClient, db: Database) -> dict[str, str]:
    """The recorded exposures, once the app has written what it queued."""
    flush_exposures(client.application)
    with db.read() as conn:
        rows = conn.execute(sa.select(experiment_exposures.c.user_id, experiment_exposures.c.variant_id)).all()
    return dict(rows)  # type: ignore[arg-type]


def announced(db: Database) -> list[tuple[str, Any]]:
    """The webhook events recorded in the outbox, oldest first: (type, data)."""
    with db.read() as conn:
        rows = conn.execute(
            sa.select(webhook_events.c.type, webhook_events.c.body).order_by(webhook_events.c.created_at)
        )
        return [(t, json.loads(body)["data"]) for t, body in rows]


def test_an_experiment_is_created_in_draft_read_listed_and_started(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    publish(db, workspace["app_id"], [1, 1, 1])
    made = create(client, workspace, holdout_pct=10, audience={"country": ["de"]}, priority=2)
    assert made.status_code == 201, made.json
    body = made.json["experiment"]
    assert made.headers["Location"] == f"/v1/experiments/{body['id']}"
    assert body["id"].startswith("exp_") and body["status"] == "draft" and body["results"] is None
    assert body["variants"] == [{"variant_id": "v0", "weight": 50.0}, {"variant_id": "v1", "weight": 50.0}]
    assert (body["holdout_pct"], body["priority"], body["version"]) == (10.0, 2, 1)
    assert body["audience"] == {"country": ["DE"]}
    assert body["started_at"] is None and body["stopped_at"] is None
    read = client.get(f"/v1/experiments/{body['id']}", headers=ro(workspace))
    assert read.status_code == 200 and read.json["experiment"] == body
    listed = client.get("/v1/experiments", query_string={"status": "draft"}, headers=ro(workspace))
    assert [x["id"] for x in listed.json["experiments"]] == [body["id"]]
    assert client.get("/v1/experiments", query_string={"status": "running"}, headers=ro(workspace)).json == {
        "experiments": []
    }
    moved = client.post(f"/v1/experiments/{body['id']}/start", headers=rw(workspace))
    assert moved.status_code == 200 and moved.json["experiment"]["status"] == "running"
    assert moved.json["experiment"]["started_at"] is not None
    with db.read() as conn:
        actions = [e["action"] for e in audit.entries(conn, workspace_id=workspace["workspace_id"])]
    assert "experiment.created" in actions and "experiment.started" in actions


def test_refusals_name_the_field_and_transitions_from_the_wrong_status_are_409(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    assert create(client, workspace).json["message"].startswith("Invalid body field 'paywall_id'")  # no config yet
    publish(db, workspace["app_id"], [1, 1])
    cases = [
        ({"variants": [{"variant_id": "v0", "weight": 1}]}, "variants"),
        ({"variants": [{"variant_id": "v0", "weight": 1}, {"variant_id": "zz", "weight": 1}]}, "variants.1.variant_id"),
        ({"variants": [{"variant_id": "v0", "weight": 0}, {"variant_id": "v1", "weight": 0}]}, "variants"),
        ({"variants": [{"variant_id": "v0", "weight": 1}, {"variant_id": "v0", "weight": 1}]}, "variants"),
        ({"holdout_pct": 95}, "holdout_pct"),
        ({"primary_metric": "clicks"}, "primary_metric"),
        ({"audience": {"app_version": ">=banana"}}, "audience"),
        ({"audience": {"planet": ["mars"]}}, "audience"),
    ]
    for body, field in cases:
        response = create(client, workspace, **body)
        assert response.status_code == 400, (body, response.json)
        assert response.json["error"] == "invalid_request" and field in response.json["message"], (body, response.json)
    assert create(client, workspace, app_id="app_unknown").status_code == 404
    assert client.post("/v1/experiments", json={}, headers=ro(workspace)).status_code == 403
    experiment_id = create(client, workspace).json["experiment"]["id"]
    stop = client.post(f"/v1/experiments/{experiment_id}/stop", headers=rw(workspace))
    assert stop.status_code == 409 and stop.json["error"] == "conflict" and "draft" in stop.json["message"]
    ship = client.post(f"/v1/experiments/{experiment_id}/ship", json={"variant_id": "v1"}, headers=rw(workspace))
    assert ship.status_code == 409
    assert client.get("/v1/experiments/exp_missing", headers=ro(workspace)).status_code == 404


def test_two_simultaneous_starts_give_one_start_and_one_409(client: FlaskClient, db: Database, workspace: dict) -> None:
    publish(db, workspace["app_id"], [1, 1])
    experiment_id = create(client, workspace).json["experiment"]["id"]
    codes = run_together(
        *[lambda: client.post(f"/v1/experiments/{experiment_id}/start", headers=rw(workspace)).status_code] * 2
    )
    assert sorted(codes) == [200, 409]


def test_exposed_users_keep_their_variant_when_weights_change_and_stopping_returns_everyone_to_the_default(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    app_id = workspace["app_id"]
    publish(db, app_id, [1, 1])
    experiment = started(client, workspace)
    first = {f"u{i}": config(client, app_id, f"u{i}").json["variant"]["variant_id"] for i in range(300)}
    split = Counter(first.values())
    assert split["v0"] > 100 and split["v1"] > 100  # 50/50
    assert exposures(client, db) == first  # recorded as served
    changed = client.patch(
        f"/v1/experiments/{experiment['id']}",
        json={"variants": [{"variant_id": "v0", "weight": 0}, {"variant_id": "v1", "weight": 1}]},
        headers=rw(workspace),
    )
    assert changed.status_code == 200 and changed.json["experiment"]["version"] == 2
    # Everyone exposed keeps their variant; newcomers all get v1.
    assert {u: config(client, app_id, u).json["variant"]["variant_id"] for u in first} == first
    assert {config(client, app_id, f"new{i}").json["variant"]["variant_id"] for i in range(50)} == {"v1"}
    removed = client.patch(
        f"/v1/experiments/{experiment['id']}", json={"variants": [{"variant_id": "v1", "weight": 1},
                                                                  {"variant_id": "v0", "weight": 1}]},
        headers=rw(workspace),
    )  # fmt: skip
    assert removed.status_code == 400 and "control" in removed.json["message"]
    stopped = client.post(f"/v1/experiments/{experiment['id']}/stop", headers=rw(workspace))
    assert stopped.status_code == 200 and stopped.json["experiment"]["status"] == "stopped"
    assert {config(client, app_id, u).json["variant"]["variant_id"] for u in first} == {"v0"}


def test_the_first_matching_experiment_by_priority_decides_and_others_get_the_default(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    app_id = workspace["app_id"]
    publish(db, app_id, [1, 1, 1])
    german = started(
        client, workspace, audience={"country": ["DE"]}, priority=1,
        variants=[{"variant_id": "v0", "weight": 0}, {"variant_id": "v1", "weight": 1}],
    )  # fmt: skip
    ios = started(
        client, workspace, audience={"platform": ["ios"]}, priority=2,
        variants=[{"variant_id": "v0", "weight": 0}, {"variant_id": "v2", "weight": 1}],
    )  # fmt: skip
    assert config(client, app_id, "a", **{"x-country": "DE", "x-platform": "ios"}).json["variant"]["variant_id"] == "v1"
    assert config(client, app_id, "b", **{"x-country": "FR", "x-platform": "ios"}).json["variant"]["variant_id"] == "v2"
    plain = config(client, app_id, "c", **{"x-country": "FR", "x-platform": "android"})
    assert plain.json["variant"]["variant_id"] == "v0"  # no experiment takes them: the default
    assert "x-country" in plain.headers["Vary"]
    via_query = client.get(
        CONFIG, query_string={"app_id": app_id, "paywall_id": "onboarding", "country": "DE"}, headers={"x-user-id": "d"}
    )
    assert via_query.json["variant"]["variant_id"] == "v1"
    flush_exposures(client.application)
    with db.read() as conn:
        rows = conn.execute(sa.select(experiment_exposures.c.user_id, experiment_exposures.c.experiment_id)).all()
    assert sorted(rows) == [("a", german["id"]), ("b", ios["id"]), ("d", german["id"])]
    bad = config(client, app_id, "e", **{"x-flokit-attributes": "{not json"})
    assert bad.status_code == 400 and "x-flokit-attributes" in bad.json["error"]


def test_the_config_carries_an_etag_and_answers_304_to_it(client: FlaskClient, db: Database, workspace: dict) -> None:
    app_id = workspace["app_id"]
    publish(db, app_id, [1, 1])
    started(client, workspace)
    first = config(client, app_id, "u1")
    tag = first.headers["ETag"]
    again = config(client, app_id, "u1", **{"If-None-Match": tag})
    assert again.status_code == 304 and again.data == b""
    assert again.headers["Cache-Control"] == "public, max-age=60, stale-while-revalidate=300"
    assert again.headers["ETag"] == tag
    assert config(client, app_id, "u1", **{"If-None-Match": f'"a", W/{tag}'}).status_code == 304  # a list, weak
    assert config(client, app_id, "u1", **{"If-None-Match": "*"}).status_code == 304
    other = config(client, app_id, "u2", **{"If-None-Match": '"something-else"'})
    assert other.status_code == 200 and other.json["paywall_id"] == "onboarding"


def test_shipping_publishes_the_winner_as_everyones_config_and_stops(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    app_id = workspace["app_id"]
    before = publish(db, app_id, [1, 1])
    experiment = started(client, workspace)
    for i in range(40):
        config(client, app_id, f"u{i}")
    shipped = client.post(f"/v1/experiments/{experiment['id']}/ship", json={"variant_id": "v1"}, headers=rw(workspace))
    assert shipped.status_code == 200, shipped.json
    events = dict(announced(db))
    assert sorted(events) == ["experiment.started", "experiment.stopped"]
    for event_type, data in events.items():
        assert payloads.conformance(data, payloads.PAYLOAD_TYPES[event_type]) == []
        assert data["experiment"]["id"] == experiment["id"]
    stopped = events["experiment.stopped"]
    assert stopped["experiment"]["shipped_variant_id"] == "v1" and stopped["srm"] is None
    assert shipped.json["experiment"]["status"] == "stopped"
    assert shipped.json["experiment"]["shipped_variant_id"] == "v1"
    answers = {config(client, app_id, f"u{i}").json["variant"]["variant_id"] for i in range(40)}
    assert answers == {"v1"}
    assert config(client, app_id, "u1").json["version"] == before + 1
    again = client.post(f"/v1/experiments/{experiment['id']}/ship", json={"variant_id": "v1"}, headers=rw(workspace))
    assert again.status_code == 409
    with db.read() as conn:
        entries = audit.entries(conn, workspace_id=workspace["workspace_id"])
    assert "experiment.shipped" in [e["action"] for e in entries]


@pytest.mark.both_backends(reason="a first exposure is an insert-or-nothing written per dialect")
def test_racing_first_exposures_record_one_variant_per_user(client: FlaskClient, db: Database, workspace: dict) -> None:
    app_id = workspace["app_id"]
    publish(db, app_id, [1, 1])
    started(client, workspace)
    answers = run_together(*[lambda: config(client, app_id, "racer").json["variant"]["variant_id"]] * 4)
    assert len(set(answers)) == 1 and exposures(client, db) == {"racer": answers[0]}


def test_a_first_exposure_another_host_recorded_first_wins_once_written(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    """After a weight change, a user whose draw depends on the version is looked up; with nothing
    recorded this worker answers its own draw and queues it. When the write finds that another
    host (still on the old weights) recorded the user first, the recorded variant is what every
    later answer serves."""
    app_id = workspace["app_id"]
    publish(db, app_id, [1, 1])
    experiment = started(client, workspace)
    changed = client.patch(
        f"/v1/experiments/{experiment['id']}",
        json={"variants": [{"variant_id": "v0", "weight": 1}, {"variant_id": "v1", "weight": 3}]},
        headers=rw(workspace),
    )
    assert changed.status_code == 200
    with db.read() as conn:
        x = repository.get(conn, workspace["workspace_id"], experiment["id"])
    splits = (((Weighted("v0", 1), Weighted("v1", 1)), 0.0), (x.variants, 0.0))
    user = next(
        f"u{i}" for i in range(1000)
        if settled_draw(x.salt, (x.variants, 0.0), splits, app_id=app_id, paywall_id="onboarding",
                        identity=f"u{i}") is None
    )  # fmt: skip
    drawn = first_variant(x.salt, x.variants, x.holdout_pct, app_id=app_id, paywall_id="onboarding", identity=user)
    other = "v1" if drawn == "v0" else "v0"
    with db.write() as conn:  # another host, first, under version 1: committed after this worker drew
        repository.record_exposures(conn, [{
            "experiment_id": experiment["id"], "user_id": user, "variant_id": other, "experiment_version": 1,
            "exposed_at": utcnow(),
        }])  # fmt: skip
        assert config(client, app_id, user).json["variant"]["variant_id"] == drawn  # nothing recorded it sees
    assert exposures(client, db) == {user: other}  # this worker's insert did nothing
    assert config(client, app_id, user).json["variant"]["variant_id"] == other
