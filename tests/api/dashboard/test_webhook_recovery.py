"""The dashboard's recovery controls over HTTP (issue 36 part 4): Resend on a delivery, Recover
since… and the Standard Webhooks switch on an endpoint; CSRF-protected, audited, workspace-bound.
Deliveries are sent by the real drain to a local receiver."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from orchestration.webhooks.drain import drain
from orchestration.webhooks.resources import WebhookHttpClient, WebhookQueue
from tests.support import WEBHOOK_KEY
from tests.support.dashboard import OPERATOR, csrf_of, sign_in
from tests.support.webhook_receiver import Receiver, receiver
from warehouse import audit
from warehouse.bootstrap import bootstrap
from warehouse.db import Database, utcnow
from warehouse.settings import Settings
from warehouse.webhooks import delivery_history, endpoints
from warehouse.webhooks.outbox import emit_event

__all__ = ["receiver"]  # fixture (tests/support/webhook_receiver.py)


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    """Private webhook addresses allowed (a receiver on 127.0.0.1) and the key secrets are sealed with."""
    return Settings(
        data_dir=tmp_path / "data", database_url=database_url, instance_key=WEBHOOK_KEY, webhooks_allow_private=True
    )


def send_due(db: Database) -> None:
    drain(db, WebhookQueue(max_workers=2), WebhookHttpClient(allow_private=True), logging.getLogger("t"), WEBHOOK_KEY)


def add(db: Database, workspace: dict, url: str) -> str:
    with db.write() as conn:
        endpoint, _ = endpoints.create_endpoint(
            conn, workspace_id=workspace["workspace_id"], url=url, events=["action.approved"],
            allow_private=True, instance_key=WEBHOOK_KEY,
        )  # fmt: skip
    return endpoint.id


def emit(db: Database, workspace: dict) -> str:
    with db.write() as conn:
        return emit_event(conn, workspace_id=workspace["workspace_id"], event_type="action.approved", data={})


def audited(db: Database, workspace: dict, subject: str) -> list[tuple[str, str]]:
    with db.read() as conn:
        return [
            (e["action"], e["actor"])
            for e in audit.entries(conn, workspace_id=workspace["workspace_id"], subject_id=subject)
        ]


def test_resend_a_delivery_from_its_page(
    browser: FlaskClient, db: Database, workspace: dict, receiver: Receiver
) -> None:
    endpoint_id = add(db, workspace, receiver.url + "/a")
    event_id = emit(db, workspace)
    send_due(db)
    with db.read() as conn:
        [sent] = delivery_history.history(conn, endpoint_id=endpoint_id)
    path = f"/dashboard/webhooks/{endpoint_id}/deliveries/{sent.delivery_id}"
    page = browser.get(path).get_data(as_text=True)
    assert ">Resend</button>" in page and "does not count towards disabling" in page
    assert browser.post(f"{path}/resend", data={}).status_code == 400  # no CSRF token
    r = browser.post(f"{path}/resend", data={"csrf_token": csrf_of(page)})
    assert r.status_code == 303 and r.headers["Location"].endswith(f"{sent.delivery_id}?done=resent")
    assert "Resend queued" in browser.get(r.headers["Location"]).get_data(as_text=True)
    send_due(db)
    first, again = receiver.at("/a")
    assert again.body == first.body and json.loads(again.body)["id"] == event_id
    assert again.header("Service-Attempt") == "2"
    assert audited(db, workspace, sent.delivery_id) == [("webhook_delivery.resent", OPERATOR)]


def test_recover_since_and_the_standard_webhooks_switch(
    browser: FlaskClient, db: Database, workspace: dict, receiver: Receiver
) -> None:
    endpoint_id = add(db, workspace, receiver.url + "/a")
    receiver.status["/a"] = 500
    since = utcnow()
    waiting = emit(db, workspace)
    send_due(db)  # fails: its retry is 30 s away
    receiver.status["/a"] = 200
    page = browser.get(f"/dashboard/webhooks/{endpoint_id}").get_data(as_text=True)
    assert "Recover since…" in page and "Standard Webhooks headers…" in page
    token = csrf_of(page)
    path = f"/dashboard/webhooks/{endpoint_id}"
    bad = browser.post(f"{path}/recover", data={"csrf_token": token, "since": "yesterday"})
    assert bad.status_code == 400 and "Give the time as YYYY-MM-DD HH:MM (UTC)." in bad.get_data(as_text=True)
    assert browser.post(f"{path}/recover", data={"since": f"{since:%Y-%m-%dT%H:%M}"}).status_code == 400  # no CSRF
    r = browser.post(f"{path}/recover", data={"csrf_token": token, "since": f"{since:%Y-%m-%dT%H:%M}"})
    assert r.status_code == 303
    shown = browser.get(r.headers["Location"]).get_data(as_text=True)
    assert "Recovery queued: 1 delivery not delivered since" in shown
    send_due(db)
    assert [json.loads(x.body)["id"] for x in receiver.at("/a")] == [waiting, waiting]
    assert audited(db, workspace, endpoint_id)[-1] == ("webhook_endpoint.recovered", OPERATOR)

    r = browser.post(f"{path}/standard-webhooks", data={"csrf_token": token, "standard_webhooks": "on"})
    assert r.status_code == 303 and "Standard Webhooks headers on" in browser.get(r.headers["Location"]).get_data(
        as_text=True
    )
    emit(db, workspace)
    send_due(db)
    assert receiver.at("/a")[-1].all("webhook-signature") != []
    assert browser.post(f"{path}/standard-webhooks", data={"csrf_token": token}).status_code == 303  # unticked: off
    emit(db, workspace)
    send_due(db)
    assert receiver.at("/a")[-1].all("webhook-signature") == []
    assert audited(db, workspace, endpoint_id)[-2:] == [("webhook_endpoint.updated", OPERATOR)] * 2


def test_the_controls_refuse_another_workspace(client: FlaskClient, db: Database, workspace: dict) -> None:
    with db.write() as conn:
        other = bootstrap(conn, name="Other Co")
    theirs = add(db, other, "http://127.0.0.1:9/x")
    emit(db, other)
    with db.read() as conn:
        [their_delivery] = delivery_history.history(conn, endpoint_id=theirs)
    mine = add(db, workspace, "http://127.0.0.1:9/y")
    sign_in(client, db, workspace["workspace_id"])
    token = csrf_of(client.get("/dashboard/webhooks").get_data(as_text=True))
    for path, data in (
        (f"/dashboard/webhooks/{theirs}/recover", {"since": "2026-11-01T00:00"}),
        (f"/dashboard/webhooks/{theirs}/standard-webhooks", {"standard_webhooks": "on"}),
        (f"/dashboard/webhooks/{theirs}/deliveries/{their_delivery.delivery_id}/resend", {}),
        (f"/dashboard/webhooks/{mine}/deliveries/{their_delivery.delivery_id}/resend", {}),
    ):
        assert client.post(path, data={"csrf_token": token, **data}).status_code == 404, path
    with db.read() as conn:
        assert (
            endpoints.get_endpoint(conn, workspace_id=other["workspace_id"], endpoint_id=theirs).standard_webhooks
            is False
        )
        assert audited(db, other, their_delivery.delivery_id) == []
