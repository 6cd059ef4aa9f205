"""Provider webhook passthrough: bytes and signature headers reach a real downstream unchanged;
its answer comes back as is; unreachable is 502, too slow is 504."""

import json
import time
from dataclasses import replace

from flask.testing import FlaskClient

from api.app import create_app
from api.passthrough.forward import PATHS
from tests.support import free_port
from tests.webhook_receiver import running_receiver
from warehouse.settings import Settings

# A body whose every byte matters to a signature: odd spacing, key order, unicode, a trailing newline.
BODY = b'{"type":"invoice.paid",  "data":{"amount":1999,"name":"J\xc3\xbcrgen"}}\n'


def client_for(settings: Settings, url: str | None, timeout: float = 10.0) -> FlaskClient:
    return create_app(replace(settings, passthrough_url=url, passthrough_timeout_s=timeout)).test_client()


def test_every_path_is_forwarded_byte_for_byte_with_its_signature_headers(settings: Settings) -> None:
    with running_receiver() as downstream:
        client = client_for(settings, downstream.url)
        for path in PATHS:
            response = client.post(
                path + "?attempt=2",
                data=BODY,
                headers={
                    "Content-Type": "application/json; charset=utf-8",
                    "Payment-Signature": "t=1732363200,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8",
                    "X-Goog-Channel-Token": "opaque",
                    "X-Forwarded-For": "203.0.113.9",
                },
            )
            assert response.status_code == 200 and response.data == b"ok", path
        assert [r.path for r in downstream.requests] == [p + "?attempt=2" for p in PATHS]
        for received in downstream.requests:
            assert received.body == BODY
            assert received.header("Payment-Signature").endswith("6d0ce8")
            assert received.header("X-Goog-Channel-Token") == "opaque"
            assert received.header("Content-Type") == "application/json; charset=utf-8"
            assert received.header("X-Forwarded-For") == "203.0.113.9, 127.0.0.1"


def test_the_downstream_answer_is_returned_as_is(settings: Settings) -> None:
    with running_receiver() as downstream:
        downstream.status["/webhooks/ios_store"] = 500
        response = client_for(settings, downstream.url).post("/webhooks/ios_store", data=b"{}")
        assert response.status_code == 500 and response.data == b"ok"  # the provider retries, as it would


def test_unreachable_unconfigured_and_slow_downstreams(settings: Settings) -> None:
    closed = client_for(settings, f"http://127.0.0.1:{free_port()}").post("/webhooks/android_store", data=b"{}")
    assert closed.status_code == 502 and closed.json == {"error": "Downstream unreachable"}
    unset = client_for(settings, None).post("/webhooks/android_store", data=b"{}")
    assert unset.status_code == 502 and "FLOKIT_PASSTHROUGH_URL" in unset.json["error"]
    with running_receiver() as downstream:
        downstream.on_receive = lambda _r: time.sleep(1.5)
        started = time.monotonic()
        slow = client_for(settings, downstream.url, timeout=0.5).post("/webhooks/payment_processor", data=b"{}")
        assert slow.status_code == 504 and "timed out" in json.loads(slow.data)["error"]
        assert time.monotonic() - started < 1.4
