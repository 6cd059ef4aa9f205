"""The dashboard's API keys and Webhooks pages over HTTP, on both databases.

Keys are checked through v1 (a rotated key's old secret answers 401 there, the new one 200);
webhook state through the warehouse functions the CLI reads (`list_endpoints`, `signing_secrets`,
the delivery history), and deliveries are given attempts with the real claim/record functions.
"""

from __future__ import annotations

import html
import re
import secrets
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from flask.testing import FlaskClient

from tests.support import WEBHOOK_KEY, bearer
from tests.support.dashboard import OPERATOR, csrf_of, sign_in
from warehouse import audit, migrate
from warehouse.bootstrap import bootstrap
from warehouse.db import Database, utcnow
from warehouse.settings import Settings
from warehouse.webhooks import deliveries, endpoints
from warehouse.webhooks.outbox import emit_event
from warehouse.workspaces import get_key, list_keys

EN = "\N{EN DASH}"


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    """As the dashboard conftest's, with private webhook addresses allowed (a receiver on 127.0.0.1)."""
    return Settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        instance_key=WEBHOOK_KEY,  # the key signing secrets are sealed with, for the tests to open them
        webhooks_allow_private=True,
    )


def text(page: str) -> str:
    return html.unescape(" ".join(re.sub(r"<[^>]+>", " ", page).split()))


def new_key_on(page: str) -> str:
    found = re.search(r'<code id="new-key">([^<]+)</code>', page)
    assert found, "no new key on the page"
    return found.group(1)


def other_workspace(db: Database) -> dict:
    with db.write() as conn:
        return bootstrap(conn, name="Other Co")


def v1_status(client: FlaskClient, key: str) -> int:
    return client.get("/v1/actions", headers=bearer(key)).status_code


def actors(db: Database, workspace: dict, subject: str) -> list[tuple[str, str]]:
    with db.read() as conn:
        return [
            (e["action"], e["actor"])
            for e in audit.entries(conn, workspace_id=workspace["workspace_id"], subject_id=subject)
        ]


# ---------------------------------------------------------------- API keys


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: workspaces.py")
def test_keys_list_shows_scope_created_and_last_used_written_once_a_minute(
    browser: FlaskClient, db: Database, workspace: dict
) -> None:
    page = browser.get("/dashboard/keys")
    assert page.status_code == 200 and 'aria-current="page">API keys<' in page.get_data(as_text=True)
    body = text(page.get_data(as_text=True))
    assert "read only" in body and "read and write" in body and body.count("never") >= 2
    with db.read() as conn:
        ro = next(k for k in list_keys(conn, workspace["workspace_id"]) if k.scope == "read_only")
    assert ro.last_used_at is None

    assert v1_status(browser, workspace["api_key_read_only"]) == 200
    with db.read() as conn:
        first = get_key(conn, workspace_id=workspace["workspace_id"], key_id=ro.id).last_used_at
    assert first is not None and abs((utcnow() - first).total_seconds()) < 60
    assert v1_status(browser, workspace["api_key_read_only"]) == 200  # within the minute: not written again
    with db.read() as conn:
        assert get_key(conn, workspace_id=workspace["workspace_id"], key_id=ro.id).last_used_at == first
    row = re.search(rf'<tr id="key-{ro.id}">.*?</tr>', browser.get("/dashboard/keys").get_data(as_text=True), re.S)
    assert row and f"{first:%Y-%m-%d %H:%M} UTC" in row.group(0) and "never" not in row.group(0)


def test_create_shows_the_key_once_and_it_works(browser: FlaskClient, db: Database, workspace: dict) -> None:
    token = csrf_of(browser.get("/dashboard/keys").get_data(as_text=True))
    r = browser.post("/dashboard/keys", data={"csrf_token": token, "scope": "read_write"})
    assert r.status_code == 201 and r.headers["Cache-Control"] == "no-store"
    page = r.get_data(as_text=True)
    key = new_key_on(page)
    assert "won't be shown again" in html.unescape(page) and 'data-copy="new-key"' in page
    assert v1_status(browser, key) == 200
    assert key not in browser.get("/dashboard/keys").get_data(as_text=True)  # shown once
    with db.read() as conn:
        created = [k for k in list_keys(conn, workspace["workspace_id"]) if k.scope == "read_write"][-1]
    assert actors(db, workspace, created.id) == [("api_key.created", OPERATOR)]

    bad = browser.post("/dashboard/keys", data={"csrf_token": token, "scope": "admin"})
    assert bad.status_code == 400
    assert 'aria-invalid="true" aria-describedby="scope-error"' in bad.get_data(as_text=True)
    assert "Choose a scope" in bad.get_data(as_text=True)


def test_rotate_makes_the_old_key_401_at_once_and_revoke_ends_it(
    browser: FlaskClient, db: Database, workspace: dict
) -> None:
    with db.read() as conn:
        rw = next(k for k in list_keys(conn, workspace["workspace_id"]) if k.scope == "read_write")
    listing = browser.get("/dashboard/keys").get_data(as_text=True)
    assert "the old key answers 401 at once" not in listing  # the dialog says it in its own words:
    assert "the old key answers 401 from that moment" in listing
    confirm = browser.get(f"/dashboard/keys/{rw.id}/rotate")  # the no-JS confirmation page
    assert confirm.status_code == 200 and "answers 401" in confirm.get_data(as_text=True)
    token = csrf_of(confirm.get_data(as_text=True))

    assert v1_status(browser, workspace["api_key_read_write"]) == 200
    r = browser.post(f"/dashboard/keys/{rw.id}/rotate", data={"csrf_token": token})
    assert r.status_code == 200 and r.headers["Cache-Control"] == "no-store"
    with db.read() as conn:  # "last used" starts again: it now tells whether the new secret is in use
        assert get_key(conn, workspace_id=workspace["workspace_id"], key_id=rw.id).last_used_at is None
    new = new_key_on(r.get_data(as_text=True))
    assert v1_status(browser, workspace["api_key_read_write"]) == 401
    assert v1_status(browser, new) == 200
    assert actors(db, workspace, rw.id)[-1] == ("api_key.rotated", OPERATOR)

    r = browser.post(f"/dashboard/keys/{rw.id}/revoke", data={"csrf_token": token})
    assert r.status_code == 303 and r.headers["Location"] == "/dashboard/keys?done=revoked"
    assert v1_status(browser, new) == 401
    assert "Key revoked" in browser.get(r.headers["Location"]).get_data(as_text=True)
    assert actors(db, workspace, rw.id)[-1] == ("api_key.revoked", OPERATOR)
    again = browser.post(f"/dashboard/keys/{rw.id}/rotate", data={"csrf_token": token})
    assert again.status_code == 409 and "already revoked" in again.get_data(as_text=True)
    assert browser.get(f"/dashboard/keys/{rw.id}/explode").status_code == 404


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: workspaces.py")
def test_keys_need_sign_in_csrf_and_the_workspace(client: FlaskClient, db: Database, workspace: dict) -> None:
    other = other_workspace(db)
    with db.read() as conn:
        theirs = list_keys(conn, other["workspace_id"])[0]
        mine = list_keys(conn, workspace["workspace_id"])[0]
    out = client.get("/dashboard/keys")
    assert out.status_code == 401 and out.content_type.startswith("text/html")
    assert client.post(f"/dashboard/keys/{mine.id}/rotate").status_code == 401
    sign_in(client, db, workspace["workspace_id"])
    assert client.post("/dashboard/keys", data={"scope": "read_only"}).status_code == 400  # no CSRF token
    assert client.post(f"/dashboard/keys/{mine.id}/revoke").status_code == 400
    token = csrf_of(client.get("/dashboard/keys").get_data(as_text=True))
    for r in (
        client.get(f"/dashboard/keys/{theirs.id}/rotate"),
        client.post(f"/dashboard/keys/{theirs.id}/rotate", data={"csrf_token": token}),
        client.post(f"/dashboard/keys/{theirs.id}/revoke", data={"csrf_token": token}),
    ):
        assert r.status_code == 404 and r.content_type.startswith("text/html")
    assert v1_status(client, other["api_key_read_only"]) == 200  # untouched
    assert theirs.id not in client.get("/dashboard/keys").get_data(as_text=True)


def test_migration_0160_down_and_up(db: Database, workspace: dict) -> None:
    assert migrate.downgrade(db, "0150") == ["0150"]
    assert "last_used_at" not in {c["name"] for c in sa.inspect(db.engine).get_columns("api_keys")}
    assert "response_excerpt" not in {c["name"] for c in sa.inspect(db.engine).get_columns("webhook_attempts")}
    assert migrate.upgrade(db) == [migrate.head()]
    assert "last_used_at" in {c["name"] for c in sa.inspect(db.engine).get_columns("api_keys")}
    assert "response_excerpt" in {c["name"] for c in sa.inspect(db.engine).get_columns("webhook_attempts")}
    with db.read() as conn:  # the keys survive, never used
        assert [k.last_used_at for k in list_keys(conn, workspace["workspace_id"])] == [None, None]


# ---------------------------------------------------------------- Webhooks


def add_endpoint(db: Database, workspace: dict, url: str = "https://hooks.example.com/in", events=("action.approved",)):
    with db.write() as conn:
        return endpoints.create_endpoint(
            conn,
            workspace_id=workspace["workspace_id"],
            url=url,
            events=list(events),
            allow_private=True,
            instance_key=WEBHOOK_KEY,
        )


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: webhooks/endpoints.py")
def test_webhooks_empty_state_and_add_with_inline_errors(browser: FlaskClient, db: Database, workspace: dict) -> None:
    page = browser.get("/dashboard/webhooks").get_data(as_text=True)
    assert "No webhook endpoints yet" in page and "HTTPS, or HTTP: this instance allows private" in page
    token = csrf_of(page)

    r = browser.post("/dashboard/webhooks", data={"csrf_token": token, "url": "ftp://x.example/", "events": []})
    assert r.status_code == 400
    bad = r.get_data(as_text=True)
    assert 'id="endpoint-url-error"' in bad and "URL must use https or http" in bad
    assert 'id="endpoint-events-error"' in bad and "Choose at least one event type" in bad
    assert 'value="ftp://x.example/"' in bad  # what was typed stays

    r = browser.post(
        "/dashboard/webhooks",
        data={
            "csrf_token": token,
            "url": "http://127.0.0.1:9/hook",
            "events": ["action.approved", "integration.error"],
        },
    )
    assert r.status_code == 201 and r.headers["Cache-Control"] == "no-store"
    created = r.get_data(as_text=True)
    secret = re.search(r'<code id="new-secret">([^<]+)</code>', created)
    with db.read() as conn:
        [e] = endpoints.list_endpoints(conn, workspace["workspace_id"])
        assert secret and endpoints.signing_secrets(conn, [e.id], utcnow(), instance_key=WEBHOOK_KEY)[e.id] == [
            secret.group(1)
        ]
    assert e.events == ("action.approved", "integration.error") and e.status == "enabled"
    assert actors(db, workspace, e.id) == [("webhook_endpoint.created", OPERATOR)]
    listing = text(browser.get("/dashboard/webhooks").get_data(as_text=True))
    assert "http://127.0.0.1:9/hook" in listing and "action.approved, integration.error" in listing
    assert secret.group(1) not in listing


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: webhooks/endpoints.py")
def test_add_refuses_http_and_private_addresses_unless_the_instance_allows(
    database_url: str, tmp_path: Path, workspace: dict, db: Database
) -> None:
    from api.app import create_app

    strict = Settings(data_dir=tmp_path / "data", database_url=database_url, instance_key=secrets.token_urlsafe(32))
    client = sign_in(create_app(strict).test_client(), db, workspace["workspace_id"])
    page = client.get("/dashboard/webhooks").get_data(as_text=True)
    assert "HTTPS only, to a host with public addresses" in page
    token = csrf_of(page)
    for url, why in (("http://hooks.example.com/in", "URL must use https."), ("https://127.0.0.1/in", "non-public")):
        r = client.post("/dashboard/webhooks", data={"csrf_token": token, "url": url, "events": ["action.approved"]})
        assert r.status_code == 400 and why in r.get_data(as_text=True)
    with db.read() as conn:
        assert endpoints.list_endpoints(conn, workspace["workspace_id"]) == []


def test_send_test_event_queues_a_delivery_shown_in_the_history(
    browser: FlaskClient, db: Database, workspace: dict
) -> None:
    endpoint, _ = add_endpoint(db, workspace)
    page = browser.get(f"/dashboard/webhooks/{endpoint.id}").get_data(as_text=True)
    assert "No deliveries yet" in page and "Send test event" in page
    token = csrf_of(page)
    r = browser.post(
        f"/dashboard/webhooks/{endpoint.id}/test", data={"csrf_token": token, "event_type": "integration.error"}
    )
    assert r.status_code == 303
    with db.read() as conn:
        [d] = deliveries.history(conn, endpoint_id=endpoint.id)
    assert d["test"] and d["event_type"] == "integration.error" and d["status"] == "pending"
    assert r.headers["Location"].endswith(f"?done=test&delivery={d['delivery_id']}")
    shown = browser.get(r.headers["Location"]).get_data(as_text=True)
    assert "Test event queued" in shown and f'id="delivery-{d["delivery_id"]}"' in shown
    bad = browser.post(f"/dashboard/webhooks/{endpoint.id}/test", data={"csrf_token": token, "event_type": "nope"})
    assert bad.status_code == 400 and 'aria-invalid="true"' in bad.get_data(as_text=True)


def fail_five_times(db: Database, endpoint_id: str) -> None:
    """Five sends that got HTTP 500, recorded by the real claim/record functions (the sender's)."""
    for i in range(5):
        now = utcnow() + timedelta(days=i + 1)  # each retry is due (the backoff is at most hours)
        with db.write() as conn:
            [claimed] = deliveries.claim(conn, now=now, limit=1, lease=timedelta(seconds=30), instance_key=WEBHOOK_KEY)
            assert claimed.endpoint_id == endpoint_id
            deliveries.record(
                conn,
                claimed,
                deliveries.SendResult(
                    status_code=500, error="HTTP 500", started_at=now, finished_at=now + timedelta(milliseconds=42)
                ),
            )


def test_a_disabled_endpoint_says_why_and_is_re_enabled(browser: FlaskClient, db: Database, workspace: dict) -> None:
    endpoint, _ = add_endpoint(db, workspace)
    with db.write() as conn:
        emit_event(
            conn, workspace_id=workspace["workspace_id"], event_type="action.approved", data={"action": {"id": "act_1"}}
        )
    fail_five_times(db, endpoint.id)
    with db.read() as conn:
        disabled = endpoints.get_endpoint(conn, workspace_id=workspace["workspace_id"], endpoint_id=endpoint.id)
    assert disabled.status == "disabled"
    why = f"disabled — 5 consecutive failures, since {disabled.disabled_at:%Y-%m-%d %H:%M} UTC"
    assert why in html.unescape(browser.get("/dashboard/webhooks").get_data(as_text=True))
    page = browser.get(f"/dashboard/webhooks/{endpoint.id}").get_data(as_text=True)
    assert why in html.unescape(page) and "Re-enable" in page
    token = csrf_of(page)
    assert (
        browser.post(
            f"/dashboard/webhooks/{endpoint.id}/test", data={"csrf_token": token, "event_type": "action.approved"}
        ).status_code
        == 409
    )

    r = browser.post(f"/dashboard/webhooks/{endpoint.id}/enable", data={"csrf_token": token})
    assert r.status_code == 303
    assert "Endpoint enabled" in browser.get(r.headers["Location"]).get_data(as_text=True)
    with db.read() as conn:
        again = endpoints.get_endpoint(conn, workspace_id=workspace["workspace_id"], endpoint_id=endpoint.id)
    assert again.status == "enabled" and again.consecutive_failures == 0
    assert actors(db, workspace, endpoint.id)[-1] == ("webhook_endpoint.enabled", OPERATOR)
    assert browser.post(f"/dashboard/webhooks/{endpoint.id}/enable", data={"csrf_token": token}).status_code == 409


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: webhooks/deliveries.py")
def test_history_filters_pages_and_a_delivery_s_attempts_and_body(
    browser: FlaskClient, db: Database, workspace: dict
) -> None:
    endpoint, _ = add_endpoint(db, workspace, events=("action.approved", "integration.error"))
    with db.write() as conn:
        for i in range(3):
            emit_event(
                conn,
                workspace_id=workspace["workspace_id"],
                event_type="action.approved",
                data={"action": {"id": f"act_{i}"}},
            )
        emit_event(conn, workspace_id=workspace["workspace_id"], event_type="integration.error", data={"n": 1})
    now = utcnow()
    with db.write() as conn:
        claimed = deliveries.claim(conn, now=now, limit=1, lease=timedelta(seconds=30), instance_key=WEBHOOK_KEY)[0]
        deliveries.record(
            conn,
            claimed,
            deliveries.SendResult(
                status_code=503,
                error="HTTP 503",
                started_at=now,
                finished_at=now + timedelta(milliseconds=250),
                response_excerpt="upstream down\x00 <b>retry</b>",
            ),
        )
    base = f"/dashboard/webhooks/{endpoint.id}"
    page = browser.get(base).get_data(as_text=True)
    assert f"1{EN}4 of 4" in page
    row = re.search(rf'<tr id="delivery-{claimed.delivery_id}">.*?</tr>', page, re.S)
    assert row and "pending" in row.group(0) and "HTTP 503" in row.group(0) and "</time>" in row.group(0)
    only = browser.get(base + "?event_type=integration.error").get_data(as_text=True)
    assert f"1{EN}1 of 1" in only and "Clear filters" in only
    assert "No deliveries match these filters" in browser.get(base + "?status=failed").get_data(as_text=True)
    first = browser.get(base + "?limit=2").get_data(as_text=True)
    assert f"1{EN}2 of 4" in first and 'rel="next"' in first and "offset=2" in first
    assert browser.get(base + "?status=bogus").status_code == 400
    assert browser.get(base + "?limit=1000").status_code == 400

    detail = browser.get(f"{base}/deliveries/{claimed.delivery_id}")
    assert detail.status_code == 200
    d = detail.get_data(as_text=True)
    assert "250 ms" in d and "HTTP 503" in d
    assert (
        "upstream down\N{REPLACEMENT CHARACTER} &lt;b&gt;retry&lt;/b&gt;" in d
    )  # kept, escaped and claimed.body.decode() in html.unescape(d)
    assert browser.get(f"{base}/deliveries/dlv_nope").status_code == 404


def test_rotate_secret_shows_the_new_one_and_until_when_both_sign(
    browser: FlaskClient, db: Database, workspace: dict
) -> None:
    endpoint, old = add_endpoint(db, workspace)
    page = browser.get(f"/dashboard/webhooks/{endpoint.id}").get_data(as_text=True)
    assert "Both the old and the new secret sign every delivery for 24 h, until" in page
    before = utcnow()
    r = browser.post(f"/dashboard/webhooks/{endpoint.id}/rotate-secret", data={"csrf_token": csrf_of(page)})
    assert r.status_code == 200 and r.headers["Cache-Control"] == "no-store"
    new = re.search(r'<code id="new-secret">([^<]+)</code>', r.get_data(as_text=True))
    with db.read() as conn:
        assert new and endpoints.signing_secrets(conn, [endpoint.id], utcnow(), instance_key=WEBHOOK_KEY)[
            endpoint.id
        ] == [new.group(1), old]
    until = before + timedelta(hours=24)
    assert f"also signs until {until:%Y-%m-%d %H:%M} UTC" in r.get_data(
        as_text=True
    ) or f"also signs until {until + timedelta(minutes=1):%Y-%m-%d %H:%M} UTC" in r.get_data(as_text=True)
    assert actors(db, workspace, endpoint.id)[-1] == ("webhook_endpoint.secret_rotated", OPERATOR)
    assert browser.get(f"/dashboard/webhooks/{endpoint.id}/confirm/rotate-secret").status_code == 200
    assert browser.get(f"/dashboard/webhooks/{endpoint.id}/confirm/explode").status_code == 404


def test_webhooks_need_sign_in_csrf_and_the_workspace(client: FlaskClient, db: Database, workspace: dict) -> None:
    other = other_workspace(db)
    theirs, their_secret = add_endpoint(db, other)
    mine, _ = add_endpoint(db, workspace)
    with db.write() as conn:
        emit_event(conn, workspace_id=other["workspace_id"], event_type="action.approved", data={})
        [their_delivery] = deliveries.history(conn, endpoint_id=theirs.id)
    assert client.get("/dashboard/webhooks").status_code == 401
    assert client.get(f"/dashboard/webhooks/{mine.id}").status_code == 401
    sign_in(client, db, workspace["workspace_id"])
    for path in ("", f"/{mine.id}/test", f"/{mine.id}/enable", f"/{mine.id}/rotate-secret"):
        assert client.post(f"/dashboard/webhooks{path}", data={"event_type": "action.approved"}).status_code == 400
    token = csrf_of(client.get("/dashboard/webhooks").get_data(as_text=True))
    for r in (
        client.get(f"/dashboard/webhooks/{theirs.id}"),
        client.get(f"/dashboard/webhooks/{theirs.id}/confirm/test"),
        client.get(f"/dashboard/webhooks/{theirs.id}/deliveries/{their_delivery['delivery_id']}"),
        client.get(f"/dashboard/webhooks/{mine.id}/deliveries/{their_delivery['delivery_id']}"),
        client.post(
            f"/dashboard/webhooks/{theirs.id}/test", data={"csrf_token": token, "event_type": "action.approved"}
        ),
        client.post(f"/dashboard/webhooks/{theirs.id}/enable", data={"csrf_token": token}),
        client.post(f"/dashboard/webhooks/{theirs.id}/rotate-secret", data={"csrf_token": token}),
    ):
        assert r.status_code == 404 and r.content_type.startswith("text/html")
    with db.read() as conn:
        assert endpoints.signing_secrets(conn, [theirs.id], utcnow(), instance_key=WEBHOOK_KEY)[theirs.id] == [
            their_secret
        ]
        assert len(deliveries.history(conn, endpoint_id=theirs.id)) == 1
    assert theirs.url not in client.get("/dashboard/webhooks").get_data(as_text=True) or theirs.id not in client.get(
        "/dashboard/webhooks"
    ).get_data(as_text=True)
