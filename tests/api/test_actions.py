"""v1 actions over HTTP: shapes, lifecycle, validation, tenancy, and the approval race on a real server."""

from datetime import UTC, datetime, timedelta

import pytest
import requests
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient

from tests.support import bearer, live_server, run_together
from tests.support.actions import seed_queue
from tests.support.engine import WORLD, connect_registry, signal_rows, write_lake
from warehouse.actions import repository as repo
from warehouse.bootstrap import bootstrap
from warehouse.db import Database
from warehouse.settings import Settings
from warehouse.tables import api_keys

T0 = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
SUMMARY_FIELDS = [
    "id",
    "type",
    "status",
    "title",
    "rationale",
    "expected_impact",
    "created_at",
    "approved_at",
    "approved_by",
]


@pytest.fixture
def rw(workspace: dict) -> dict:
    return bearer(workspace["api_key_read_write"])


@pytest.fixture
def rw_key_id(db: Database, workspace: dict) -> str:
    """The id of the read-write key: the actor of what it creates."""
    with db.read() as conn:
        return str(
            conn.execute(
                sa.select(api_keys.c.id).where(
                    api_keys.c.workspace_id == workspace["workspace_id"], api_keys.c.scope == "read_write"
                )
            ).scalar_one()
        )


@pytest.fixture
def ro(workspace: dict) -> dict:
    return bearer(workspace["api_key_read_only"])


def create(client: FlaskClient, workspace: dict, action_type: str = "shift_budget", **extra) -> str:
    r = client.post(
        "/v1/actions",
        json={"workspace_id": workspace["workspace_id"], "type": action_type, **extra},
        headers=bearer(workspace["api_key_read_write"]),
    )
    assert r.status_code == 201, r.json
    return r.json["id"]


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: paywalls/history.py, actions/timeline.py")
def test_create_answers_ready_for_approval_and_lists_as_ready(
    client: FlaskClient, workspace: dict, rw: dict, ro: dict, rw_key_id: str
) -> None:
    r = client.post(
        "/v1/actions",
        json={"workspace_id": workspace["workspace_id"], "type": "pause_creative", "reason": "CTR collapsed"},
        headers=rw,
    )
    assert r.status_code == 201 and r.json == {"id": r.json["id"], "status": "ready_for_approval"}
    assert r.json["id"].startswith("act_") and r.headers["Location"] == f"/v1/actions/{r.json['id']}"
    listed = client.get("/v1/actions", headers=ro).json
    assert listed["total"] == 1 and listed["limit"] == 20 and listed["offset"] == 0
    action = listed["actions"][0]
    assert list(action) == SUMMARY_FIELDS
    assert action["status"] == "ready" and action["type"] == "creative_pause"
    assert action["rationale"] == "CTR collapsed" and action["approved_at"] is None
    assert action["title"] == f"Creative pause proposed by API key {rw_key_id}"
    assert action["created_at"].endswith("Z")


def test_a_created_action_is_the_clients_own_proposal_with_nothing_invented(
    client: FlaskClient, db: Database, workspace: dict, ro: dict, rw_key_id: str
) -> None:
    """Without parameters FloKit evaluated nothing: no signals, checks or conditions, no
    estimate; the title and rationale say who proposed it (docs/actions-engine.md, "Decisions")."""
    key_id = rw_key_id
    action_id = create(client, workspace)
    r = client.get(f"/v1/actions/{action_id}", headers=ro)
    assert r.status_code == 200
    detail = r.json["action"]
    assert list(detail)[: len(SUMMARY_FIELDS)] == SUMMARY_FIELDS
    assert detail["title"] == f"Budget shift proposed by API key {key_id}"
    assert detail["rationale"] == (
        f"Budget shift proposed by API key {key_id} without a reason. FloKit evaluated nothing for it: "
        "no data signals, guardrail checks or rollback conditions were computed."
    )
    assert detail["expected_impact"] == {"metric": "not_estimated", "direction": "not_estimated", "magnitude": 0.0}
    assert detail["data_signals"] == [] and detail["guardrail_checks"] == [] and detail["rollback_conditions"] == []
    assert detail["parameters"] is None and detail["status"] == "ready"
    with db.read() as conn:
        stored = repo.get_action(conn, workspace_id=workspace["workspace_id"], action_id=action_id)
    assert (stored.origin, stored.fingerprint, stored.rollback_rules) == ("api", None, [])
    assert detail["history"] == [
        {
            "entry": "transition", "from_status": None, "to_status": "ready", "trigger": "create",
            "actor": key_id, "note": None, "at": detail["created_at"],
        }
    ]  # fmt: skip


def test_history_shows_evaluations_with_the_transitions_oldest_first(
    client: FlaskClient, db: Database, workspace: dict, ro: dict
) -> None:
    ws = workspace["workspace_id"]
    action_id = create(client, workspace, "pause_creative", reason="CTR collapsed")
    with db.write() as conn:
        repo.record_evaluation(
            conn, action_id=action_id, workspace_id=ws, kind="preflight", outcome="refused", engine_version="0.1.0",
            data_as_of=T0, detail={"summary": "Budget of meta_broad changed on Meta since the proposal", "live": 5_000},
        )  # fmt: skip
        repo.record_evaluation(
            conn, action_id=action_id, kind="monitor", outcome="pending", engine_version=None, data_as_of=None,
            workspace_id=ws,
            detail={},
        )  # fmt: skip
        repo.transition(conn, workspace_id=ws, action_id=action_id, trigger="reject", actor="lee", note="no")
    history = client.get(f"/v1/actions/{action_id}", headers=ro).json["action"]["history"]
    assert [(h["entry"], h.get("trigger") or h["kind"]) for h in history] == [
        ("transition", "create"), ("evaluation", "preflight"), ("evaluation", "monitor"), ("transition", "reject"),
    ]  # fmt: skip
    said = "Budget of meta_broad changed on Meta since the proposal"
    assert history[1] == {
        "entry": "evaluation", "kind": "preflight", "outcome": "refused", "summary": said,
        "engine_version": "0.1.0", "data_as_of": "2026-11-21T12:00:00.000Z", "detail": {"summary": said, "live": 5000},
        "at": history[1]["at"],
    }  # fmt: skip
    assert history[2]["summary"] == "Monitor check: pending" and history[2]["data_as_of"] is None
    assert [h["at"] for h in history] == sorted(h["at"] for h in history)


def _with_data(db: Database, settings: Settings, workspace: dict) -> None:
    """The planted world of tests/support/engine.py in the lake and a sandbox registry."""
    today = datetime.now(UTC).date()
    through = today - timedelta(days=1)
    write_lake(settings.paths.lake(), signal_rows(workspace["workspace_id"], through, WORLD), through)
    connect_registry(db, workspace["workspace_id"], WORLD)


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: actions/engine_inputs.py, reports/report_lake.py")
def test_parameters_run_the_engine_guardrails_ready_when_they_pass(
    client: FlaskClient, db: Database, settings: Settings, workspace: dict, rw: dict, ro: dict
) -> None:
    _with_data(db, settings, workspace)
    params = {"from_campaign": "slow", "to_campaign": "fast", "amount_per_day": 20, "currency": "USD"}
    r = client.post(
        "/v1/actions",
        json={"workspace_id": workspace["workspace_id"], "type": "shift_budget", "parameters": params},
        headers=rw,
    )
    assert r.status_code == 201 and r.json["status"] == "ready_for_approval", r.json
    detail = client.get(f"/v1/actions/{r.json['id']}", headers=ro).json["action"]
    assert detail["parameters"] == {**params, "amount_per_day": 20.0}
    assert detail["title"] == "Shift 20.00 USD/day from slow to fast"
    assert {c["check"] for c in detail["guardrail_checks"]} >= {
        "minimum_cohort_size", "statistical_confidence", "spend_change_within_limit", "data_fresh",
    }  # fmt: skip
    assert all(c["passed"] for c in detail["guardrail_checks"]) and len(detail["rollback_conditions"]) == 4
    [created, evaluation] = detail["history"]
    assert created["entry"] == "transition" and evaluation["kind"] == "create" and evaluation["outcome"] == "passed"
    assert evaluation["detail"]["guardrail_checks"] == detail["guardrail_checks"]
    # A second one on the same subject while the first is open: 409 (one open action per fingerprint).
    again = client.post(
        "/v1/actions",
        json={"workspace_id": workspace["workspace_id"], "type": "shift_budget", "parameters": params},
        headers=rw,
    )
    assert again.status_code == 409


def test_parameters_that_fail_a_guardrail_make_a_draft(
    client: FlaskClient, db: Database, settings: Settings, workspace: dict, rw: dict, ro: dict
) -> None:
    _with_data(db, settings, workspace)
    params = {"from_campaign": "slow", "to_campaign": "fast", "amount_per_day": 35.5, "currency": "USD"}
    r = client.post(
        "/v1/actions",
        json={"workspace_id": workspace["workspace_id"], "type": "budget_shift", "parameters": params},
        headers=rw,
    )
    assert r.status_code == 201 and r.json["status"] == "draft"
    detail = client.get(f"/v1/actions/{r.json['id']}", headers=ro).json["action"]
    failed = [c for c in detail["guardrail_checks"] if not c["passed"]]
    assert [c["check"] for c in failed] == ["spend_change_within_limit"]
    assert failed[0]["detail"].startswith("moves 35.50 USD/day: 36 % of slow")
    pause = client.post(
        "/v1/actions",
        json={
            "workspace_id": workspace["workspace_id"],
            "type": "pause_creative",
            "parameters": {"creative": "good_cr", "campaign": "mixed"},  # the better creative: no signal
        },
        headers=rw,
    )
    assert pause.status_code == 201 and pause.json["status"] == "draft"
    checks = client.get(f"/v1/actions/{pause.json['id']}", headers=ro).json["action"]["guardrail_checks"]
    assert "statistical_confidence" in [c["check"] for c in checks if not c["passed"]]


def test_parameters_without_data_make_a_draft_that_says_so(
    client: FlaskClient, workspace: dict, rw: dict, ro: dict
) -> None:
    params = {"creative": "ugc_v3", "campaign": "meta_broad"}
    r = client.post(
        "/v1/actions",
        json={"workspace_id": workspace["workspace_id"], "type": "creative_pause", "parameters": params},
        headers=rw,
    )
    assert r.status_code == 201 and r.json["status"] == "draft"
    detail = client.get(f"/v1/actions/{r.json['id']}", headers=ro).json["action"]
    assert detail["parameters"] == params and detail["data_signals"] == []
    [check] = detail["guardrail_checks"]
    assert check["check"] == "minimum_cohort_size" and not check["passed"]
    assert "hold no data this subject can be evaluated on" in check["detail"]


@pytest.mark.parametrize(
    ("action_type", "params", "field"),
    [
        ("shift_budget", {"from_campaign": "a", "to_campaign": "b", "amount_per_day": 0, "currency": "USD"}, "amount"),
        (
            "shift_budget",
            {"from_campaign": "a", "to_campaign": "b", "amount_per_day": 5, "currency": "usd"},
            "currency",
        ),
        (
            "shift_budget",
            {"from_campaign": "a" * 201, "to_campaign": "b", "amount_per_day": 5, "currency": "USD"},
            "from",
        ),
        ("creative_pause", {"creative": "a", "campaign": "b", "extra": 1}, "extra"),
        ("creative_pause", {"from_campaign": "a"}, "creative"),
        ("offer_test", {"paywall_id": "p", "country": "USA", "control_offer": "a", "treatment_offer": "b"}, "country"),
    ],
)
def test_bad_parameters_are_400_naming_the_field(
    client: FlaskClient, workspace: dict, rw: dict, ro: dict, action_type: str, params: dict, field: str
) -> None:
    r = client.post(
        "/v1/actions",
        json={"workspace_id": workspace["workspace_id"], "type": action_type, "parameters": params},
        headers=rw,
    )
    assert r.status_code == 400 and r.json["message"].startswith("parameters.") and field in r.json["message"], r.json
    assert client.get("/v1/actions", headers=ro).json["total"] == 0


def test_approve_then_approve_again_is_409(client: FlaskClient, workspace: dict, rw: dict) -> None:
    action_id = create(client, workspace)
    r = client.post(f"/v1/actions/{action_id}/approve", json={"approved_by": "ana@acme.com", "note": "go"}, headers=rw)
    assert r.status_code == 200
    assert r.json["status"] == "ok"
    assert r.json["action"]["status"] == "approved" and r.json["action"]["approved_by"] == "ana@acme.com"
    assert r.json["action"]["approved_at"].endswith("Z")
    again = client.post(f"/v1/actions/{action_id}/approve", json={"approved_by": "bo"}, headers=rw)
    assert again.status_code == 409 and again.json["error"] == "conflict" and "approved" in again.json["message"]
    history = client.get(f"/v1/actions/{action_id}", headers=rw).json["action"]["history"]
    assert history[-1] == {**history[-1], "trigger": "approve", "actor": "ana@acme.com", "note": "go"}


def test_reject_and_rollback(client: FlaskClient, db: Database, workspace: dict, rw: dict) -> None:
    action_id = create(client, workspace)
    r = client.post(f"/v1/actions/{action_id}/reject", json={"rejected_by": "lee", "reason": "freeze"}, headers=rw)
    assert r.status_code == 200 and r.json == {"status": "ok", "action": {"id": action_id, "status": "rejected"}}
    assert client.post(f"/v1/actions/{action_id}/reject", json={"rejected_by": "lee"}, headers=rw).status_code == 409
    assert client.post(f"/v1/actions/{action_id}/rollback", headers=rw).status_code == 409
    with db.write() as conn:
        demo = {a.status: a for a in seed_queue(conn, workspace_id=workspace["workspace_id"])}
    running = demo["running"]
    r = client.post(f"/v1/actions/{running.id}/rollback", headers=rw)
    assert r.status_code == 200 and r.json["action"] == {"id": running.id, "status": "rolled_back"}
    assert client.post(f"/v1/actions/{running.id}/rollback", headers=rw).status_code == 409


def test_offer_tests_cannot_be_rolled_back(client: FlaskClient, db: Database, workspace: dict, rw: dict) -> None:
    action_id = create(client, workspace, "prepare_offer_test")
    with db.write() as conn:
        for trigger in ("approve", "start"):
            repo.transition(
                conn, workspace_id=workspace["workspace_id"], action_id=action_id, trigger=trigger, actor="x"
            )
    r = client.post(f"/v1/actions/{action_id}/rollback", headers=rw)
    assert r.status_code == 409 and "cannot be rolled back" in r.json["message"]


def test_status_filter_and_paging(client: FlaskClient, db: Database, workspace: dict, ro: dict) -> None:
    with db.write() as conn:
        seed_queue(conn, workspace_id=workspace["workspace_id"])
    everything = client.get("/v1/actions?limit=100", headers=ro).json
    assert everything["total"] == 8
    ids = [a["id"] for a in everything["actions"]]
    created = [a["created_at"] for a in everything["actions"]]
    assert created == sorted(created, reverse=True)
    page = client.get("/v1/actions?limit=3&offset=3", headers=ro).json
    assert [a["id"] for a in page["actions"]] == ids[3:6] and page["limit"] == 3 and page["offset"] == 3
    for status in ("draft", "ready", "approved", "running", "completed", "rejected", "rolled_back"):
        r = client.get(f"/v1/actions?status={status}", headers=ro).json
        assert r["total"] >= 1 and {a["status"] for a in r["actions"]} == {status}


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("status=done", "status"),
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=ten", "limit"),
        ("offset=-1", "offset"),
    ],
)
def test_bad_list_queries_are_400_naming_the_field(client: FlaskClient, ro: dict, query: str, field: str) -> None:
    r = client.get(f"/v1/actions?{query}", headers=ro)
    assert r.status_code == 400 and r.json["error"] == "invalid_request"
    assert f"'{field}'" in r.json["message"]


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("approve", {}, "approved_by"),
        ("approve", {"approved_by": 7}, "approved_by"),
        ("approve", {"approved_by": "a", "note": ["x"]}, "note"),
        ("reject", {"reason": "x"}, "rejected_by"),
        ("reject", {"rejected_by": ""}, "rejected_by"),
    ],
)
def test_bad_transition_bodies_are_400_naming_the_field(
    client: FlaskClient, workspace: dict, rw: dict, path: str, body: dict, field: str
) -> None:
    action_id = create(client, workspace)
    r = client.post(f"/v1/actions/{action_id}/{path}", json=body, headers=rw)
    assert r.status_code == 400 and r.json["error"] == "invalid_request" and f"'{field}'" in r.json["message"]


def test_bad_create_bodies(client: FlaskClient, workspace: dict, rw: dict) -> None:
    ws = workspace["workspace_id"]
    for body, field in (
        ({"type": "shift_budget"}, "workspace_id"),
        ({"workspace_id": ws}, "type"),
        ({"workspace_id": ws, "type": "raise_prices"}, "type"),
        ({"workspace_id": ws, "type": "budget_shift", "reason": 3}, "reason"),
    ):
        r = client.post("/v1/actions", json=body, headers=rw)
        assert r.status_code == 400 and f"'{field}'" in r.json["message"], (body, r.json)
    r = client.post("/v1/actions", data="not json", headers=rw)
    assert r.status_code == 400 and r.json["error"] == "invalid_request"
    r = client.post("/v1/actions", json=["a"], headers=rw)
    assert r.status_code == 400 and r.json["error"] == "invalid_request"


def test_tenancy_other_workspace_is_404_and_nothing_is_written(
    client: FlaskClient, db: Database, workspace: dict, rw: dict
) -> None:
    with db.write() as conn:
        other = bootstrap(conn, name="Other Co")
    theirs = create(client, other)
    for method, path, body in (
        ("get", f"/v1/actions/{theirs}", None),
        ("post", f"/v1/actions/{theirs}/approve", {"approved_by": "mallory"}),
        ("post", f"/v1/actions/{theirs}/reject", {"rejected_by": "mallory"}),
        ("post", f"/v1/actions/{theirs}/rollback", None),
        ("get", "/v1/actions/act_doesnotexist", None),
    ):
        r = getattr(client, method)(path, json=body, headers=rw)
        assert r.status_code == 404 and r.json["error"] == "not_found", path
    r = client.post("/v1/actions", json={"workspace_id": other["workspace_id"], "type": "shift_budget"}, headers=rw)
    assert r.status_code == 404 and r.json["error"] == "not_found"
    theirs_list = client.get("/v1/actions", headers=bearer(other["api_key_read_only"])).json
    assert theirs_list["total"] == 1 and theirs_list["actions"][0]["status"] == "ready"
    assert client.get("/v1/actions", headers=rw).json["total"] == 0


def test_permissions_read_only_reads_read_write_writes(client: FlaskClient, workspace: dict, ro: dict) -> None:
    action_id = create(client, workspace)
    assert client.get("/v1/actions", headers=ro).status_code == 200
    assert client.get(f"/v1/actions/{action_id}", headers=ro).status_code == 200
    for path, body in (
        (f"/v1/actions/{action_id}/approve", {"approved_by": "x"}),
        (f"/v1/actions/{action_id}/reject", {"rejected_by": "x"}),
        (f"/v1/actions/{action_id}/rollback", None),
        ("/v1/actions", {"workspace_id": workspace["workspace_id"], "type": "shift_budget"}),
    ):
        r = client.post(path, json=body, headers=ro)
        assert r.status_code == 403 and r.json["error"] == "forbidden", path
        assert client.post(path, json=body).status_code == 401
    assert client.get("/v1/actions").status_code == 401


@pytest.mark.both_backends(
    reason="a race for one row: SQLite's database lock and PostgreSQL's row lock must both let exactly one approval win"
)
def test_two_simultaneous_approvals_over_http_one_200_one_409(app: Flask, workspace: dict, rw: dict) -> None:
    client = app.test_client()
    with live_server(app) as base:
        for _round in range(5):
            action_id = create(client, workspace)
            url = f"{base}/v1/actions/{action_id}/approve"
            responses = run_together(
                lambda url=url: requests.post(url, json={"approved_by": "ana"}, headers=rw, timeout=30),
                lambda url=url: requests.post(url, json={"approved_by": "bo"}, headers=rw, timeout=30),
            )
            assert sorted(r.status_code for r in responses) == [200, 409]
            history = client.get(f"/v1/actions/{action_id}", headers=rw).json["action"]["history"]
            assert [h["trigger"] for h in history] == ["create", "approve"]


def test_nul_characters_are_400_not_a_database_error(client: FlaskClient, workspace: dict, rw: dict) -> None:
    """PostgreSQL text cannot hold NUL: refused at the edge on both databases alike."""
    action_id = create(client, workspace)
    r = client.get("/v1/actions/act_%00x", headers=rw)
    assert r.status_code == 400 and "'action_id'" in r.json["message"]
    r = client.post(f"/v1/actions/{action_id}/approve", json={"approved_by": "a\x00b"}, headers=rw)
    assert r.status_code == 400 and "'approved_by'" in r.json["message"]
    r = client.get("/v1/actions?status=re%00ady", headers=rw)
    assert r.status_code == 400
    r = client.post(
        "/v1/events",
        json={"event": "e", "user_id": "u", "timestamp": "2026-11-21T00:00:00Z", "properties": {"a": ["\x00"]}},
        headers=rw,
    )
    assert r.status_code == 400 and "'properties.a.0'" in r.json["message"]
