"""The test webhook's sample `data` has exactly the shape of the real event, for every event type.

Each real event is produced through the code path that emits it in production (an action
created, approved, started and rolled back; an endpoint disabled by real failed sends to a real
receiver; a real reports refresh), each sample through the test webhook's own path
(`emit_test_event`), and both are read back as the outbox stored them: the bytes a receiver
gets. They are compared key by key, recursively, JSON type by JSON type.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import sqlalchemy as sa

from orchestration.actions.monitor import monitor_workspace
from orchestration.webhooks.drain import drain
from orchestration.webhooks.resources import WebhookHttpClient, WebhookQueue
from tests.support import WEBHOOK_KEY
from tests.support.actions import literal_content
from tests.support.monitor import CPI_RULE, plant, running_action, times
from tests.support.paywalls import document
from tests.support.reports import refresh, seed_lake
from tests.support.webhook_receiver import Receiver, running_receiver
from transforms.experiments.assignment import Weighted
from transforms.integrations.kinds import validate_config
from transforms.paywall import parse_document
from transforms.webhooks.backoff import DISABLE_AFTER_FAILURES
from transforms.webhooks.envelope import EVENT_TYPES
from transforms.webhooks.payloads import (
    PAYLOAD_TYPES,
    SAMPLE_DATA,
    conformance,
    integration_error,
    json_type,
    typed_dict_hints,
)
from warehouse.actions import repository
from warehouse.db import Database, utcnow
from warehouse.experiments import repository as experiments
from warehouse.integrations import repository as integrations_repo
from warehouse.lake import LocalLake
from warehouse.paywalls import configs
from warehouse.tables import apps
from warehouse.webhooks import endpoints
from warehouse.webhooks.outbox import emit_test_event
from warehouse.webhooks.tables import webhook_events

PARITY_KEY = "p" * 43  # the instance key the parity test seals its integration credentials with

ACTION_EVENTS = ["action.created", "action.approved", "action.rolled_back"]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with running_receiver() as r:
        yield r


def stored(db: Database, event_type: str, *, test: bool) -> list[dict[str, Any]]:
    with db.read() as conn:
        bodies = conn.execute(
            sa.select(webhook_events.c.body)
            .where(webhook_events.c.type == event_type, webhook_events.c.test == test)
            .order_by(webhook_events.c.created_at, webhook_events.c.id)
        ).scalars()
        return [json.loads(body)["data"] for body in bodies]


def shape_differences(sample: Any, real: Any, declared: Any, path: str = "data") -> list[str]:
    """Keys present in one and not the other, or values of different JSON types, recursively.
    A null against a value is a difference unless the declared type admits null there."""
    a, b = json_type(sample), json_type(real)
    if a != b:
        nullable = not conformance(None, declared)
        return [] if nullable and "null" in (a, b) else [f"{path}: sample {a}, real {b}"]
    if a != "object":
        return []
    out = [f"{path}.{k}: only in the sample" for k in sample if k not in real]
    out += [f"{path}.{k}: only in the real event" for k in real if k not in sample]
    hints = typed_dict_hints(declared) or {}
    for key in sample.keys() & real.keys():
        out += shape_differences(sample[key], real[key], hints.get(key, Any), f"{path}.{key}")
    return out


def produce_real_events(db: Database, workspace_id: str, receiver: Receiver, data_dir: Path, url: str) -> None:
    """Every event type that has a producer, through that producer."""
    with db.write() as conn:
        # action.created (ready and draft), action.approved, action.rolled_back
        action = repository.create_action(
            conn,
            workspace_id=workspace_id,
            action_type="budget_shift",
            content=literal_content("budget_shift"),
            actor="parity-test",
            origin="demo",
        )
        repository.create_action(
            conn,
            workspace_id=workspace_id,
            action_type="offer_test",
            content=literal_content("offer_test", guardrails_pass=False),
            actor="parity-test",
            origin="demo",
        )
        for trigger in ("approve", "start", "rollback"):
            repository.transition(
                conn, workspace_id=workspace_id, action_id=action.id, trigger=trigger, actor="maya@example.com"
            )
        # integration.error: one endpoint answers 500, one refuses connections; another hears of both.
        receiver.status["/fails"] = 500
        for failing in (receiver.url + "/fails", "http://127.0.0.1:9/refused"):
            endpoints.create_endpoint(
                conn,
                workspace_id=workspace_id,
                url=failing,
                events=["action.created"],
                allow_private=True,
                instance_key=WEBHOOK_KEY,
            )
        endpoints.create_endpoint(
            conn,
            workspace_id=workspace_id,
            url=receiver.url + "/ops",
            events=["integration.error"],
            allow_private=True,
            instance_key=WEBHOOK_KEY,
        )
        for _ in range(DISABLE_AFTER_FAILURES):
            repository.create_action(
                conn,
                workspace_id=workspace_id,
                action_type="creative_pause",
                content=literal_content("creative_pause"),
                actor="parity-test",
                origin="demo",
            )
        # integration.error, the sync-refused reason: a sync the provider refused, ended by the
        # repository function every sync run ends through.
        integration = integrations_repo.connect(
            conn,
            workspace_id=workspace_id,
            integration_type="attribution_provider_a",
            config=validate_config("attribution_provider_a", {"api_token": "parity-token-0123456789"}),
            instance_key=PARITY_KEY,
            actor="parity-test",
        )
        sync, _ = integrations_repo.request_sync_for_operator(conn, integration_id=integration.id)
        integrations_repo.start_sync(conn, sync_id=sync.id, run_id="parity-run", instance_key=PARITY_KEY)
        integrations_repo.finish_failure(
            conn, sync_id=sync.id, code="auth", message="HTTP 401: Unauthorized", refused=True
        )
    queue = WebhookQueue(max_run_s=20.0, max_workers=1)
    drain(
        db,
        queue,
        WebhookHttpClient(allow_private=True, connect_timeout_s=2.0),
        logging.getLogger("parity"),
        WEBHOOK_KEY,
    )
    # experiment.started, then experiment.srm_detected from the refresh below (its experiment_results
    # asset), on 700 exposures against 300 where the weights expect 500 each; experiment.stopped after.
    experiment = _skewed_experiment(db, workspace_id)
    # report.payback_updated: a real refresh of the reports over a lake of this workspace.
    seed_lake(data_dir, workspace_id, users=200, days=20)
    with dg.DagsterInstance.ephemeral() as instance:
        result = refresh(data_dir, url, instance)
        assert result is not None and result.success
    # guardrail.triggered: the monitor, on a running action whose campaign's CPI doubled since the
    # change (and which it rolls back: one more action.created and action.rolled_back).
    effective, today = times()
    monitor_lake = LocalLake(data_dir / "monitor-lake")
    plant(
        monitor_lake,
        workspace_id,
        effective,
        today,
        {"installs": 100, "spend": 200.0},
        {"installs": 100, "spend": 400.0},
    )
    running_action(db, workspace_id, effective, [CPI_RULE])
    checks = monitor_workspace(db, monitor_lake, workspace_id, run_key="parity")
    assert [c.transition for c in checks] == ["rollback"]
    with db.write() as conn:
        experiments.transition(conn, workspace_id, experiment, "stop", actor="parity-test")


def _skewed_experiment(db: Database, workspace_id: str) -> str:
    with db.write() as conn:
        app_id = conn.execute(sa.select(apps.c.id).where(apps.c.workspace_id == workspace_id)).scalar_one()
        # The sample's variant ids, so that the srm counts' keys compare with the sample's.
        doc = document([1, 1], False).model_dump(mode="json")
        for variant, name in zip(doc["variants"], ("control", "annual_first"), strict=True):
            variant["variant_id"] = name
        configs.publish(conn, app_id=app_id, paywall_id="onboarding", document=parse_document(doc), actor="t")
        made = experiments.create(
            conn, workspace_id=workspace_id, app_id=app_id, paywall_id="onboarding", name="parity",
            variants=[Weighted("control", 1), Weighted("annual_first", 1)], holdout_pct=0.0,
            primary_metric="paid_conversion_rate",
            audience=None, priority=0, actor="parity-test",
        )  # fmt: skip
        experiments.transition(conn, workspace_id, made.id, "start", actor="parity-test")
        at = utcnow()
        experiments.record_exposures(conn, [
            {"experiment_id": made.id, "user_id": f"x{i}", "variant_id": "control" if i < 700 else "annual_first",
             "experiment_version": 1, "exposed_at": at}
            for i in range(1000)
        ])  # fmt: skip
    return made.id


def test_every_sample_has_the_shape_of_the_real_event(
    database_url: str, db: Database, workspace: dict, receiver: Receiver, tmp_path: Path
) -> None:
    workspace_id = workspace["workspace_id"]
    produce_real_events(db, workspace_id, receiver, tmp_path / "data", database_url)
    with db.write() as conn:
        for event_type in EVENT_TYPES:
            emit_test_event(conn, workspace_id=workspace_id, event_type=event_type)

    assert set(PAYLOAD_TYPES) == set(EVENT_TYPES) == set(SAMPLE_DATA)
    produced = set()
    for event_type in EVENT_TYPES:
        declared = PAYLOAD_TYPES[event_type]
        (sample,) = stored(db, event_type, test=True)
        assert conformance(sample, declared) == [], event_type
        reals = stored(db, event_type, test=False)
        for real in reals:
            assert conformance(real, declared) == [], (event_type, real)
            assert shape_differences(sample, real, declared) == [], (event_type, real)
        if reals:
            produced.add(event_type)
    assert produced == set(EVENT_TYPES)
    assert len(stored(db, "action.created", test=False)) == 3 + DISABLE_AFTER_FAILURES
    errors = stored(db, "integration.error", test=False)
    disabled = [e for e in errors if e["reason"] == "webhook_endpoint_disabled"]
    assert sorted(e["last_status_code"] is None for e in disabled) == [False, True]  # both kinds of failure
    [refused] = [e for e in errors if e["reason"] == "integration_sync_failed"]
    assert refused["error_code"] == "auth" and refused["message"] == "HTTP 401: Unauthorized"


def test_the_shape_comparison_sees_a_missing_key_and_a_changed_type() -> None:
    """The old samples, as they were before the payloads were declared once, fail the comparison."""
    declared = PAYLOAD_TYPES["integration.error"]
    old_sample = {"integration_id": "int_sample", "error": "Sample sync failure"}
    assert conformance(old_sample, declared)
    real = dict(
        integration_error(
            endpoint_id="we_1", url="https://x.example/h", consecutive_failures=20, last_status_code=500, last_error="x"
        )
    )
    assert shape_differences(SAMPLE_DATA["integration.error"], real, declared) == []
    assert shape_differences({**real, "consecutive_failures": "5"}, real, declared) == [
        "data.consecutive_failures: sample string, real number"
    ]
    assert shape_differences({**real, "last_status_code": None}, real, declared) == []  # declared nullable
    old_action = {"action": {"id": "act_sample", "type": "budget_shift", "status": "ready", "title": "Sample action"}}
    assert "data.action.rationale: only in the real event" in shape_differences(
        old_action, SAMPLE_DATA["action.created"], PAYLOAD_TYPES["action.created"]
    )
