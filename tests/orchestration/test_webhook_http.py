"""The webhook HTTP client resource against a real local server: status codes, no redirects,
errors as values, and the per-send public-address check."""

from __future__ import annotations

from orchestration.webhooks.resources import WebhookHttpClient
from tests.support import free_port
from tests.support.webhook_receiver import running_receiver


def test_client_reports_status_and_errors_as_values() -> None:
    http = WebhookHttpClient(allow_private=True)
    with running_receiver() as receiver:
        receiver.status["/fail"] = 500
        receiver.status["/moved"] = 302
        assert http.post(url=receiver.url + "/ok", body=b"{}", headers={}) == (200, None)
        assert http.post(url=receiver.url + "/fail", body=b"{}", headers={}) == (500, "HTTP 500")
        assert http.post(url=receiver.url + "/moved", body=b"{}", headers={}) == (302, "HTTP 302")
        assert [r.path for r in receiver.requests] == ["/ok", "/fail", "/moved"]
    status, error = http.post(url=f"http://127.0.0.1:{free_port()}/", body=b"{}", headers={})
    assert status is None and error is not None and error.startswith("network error")


def test_client_refuses_private_addresses_at_send_time() -> None:
    with running_receiver() as receiver:
        https_url = receiver.url.replace("http://", "https://")  # https: the scheme rule would refuse first
        status, error = WebhookHttpClient(allow_private=False).post(url=https_url, body=b"{}", headers={})
        assert receiver.requests == []
    assert status is None and error is not None and "non-public" in error
