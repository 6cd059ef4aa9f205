"""Provider webhooks, forwarded downstream as they came: the raw body bytes, the provider's
signature headers, the query string. The downstream service verifies the signatures, so nothing
here may change a byte the signature covers.

The downstream's answer goes back to the provider as is (status, body, content type), so a
provider that retries on failure retries exactly when the downstream failed. Unreachable: 502;
no answer within the timeout (10 s): 504. Nothing is stored here: the provider's own retry is
the durability.
"""

from __future__ import annotations

import requests
from flask import Response, request

from api.context import state
from api.downstream import session
from api.errors import ApiError
from api.openapi import operation
from api.passthrough import blueprint

# Provider kind of each path (spec "Provider webhook passthrough").
PATHS: dict[str, str] = {
    "/webhooks/payment_processor": "payment processor (its own signature header)",
    "/webhooks/ios_store": "iOS store server notifications V2",
    "/webhooks/android_store": "Android store real-time developer notifications (Pub/Sub push)",
    "/api/providers/subscription_provider_a/webhook": "subscription provider A",
    "/api/providers/subscription_provider_b/webhook": "subscription provider B",
    "/api/providers/generic-subscription/webhook": "generic subscription provider",
    "/api/integrations/mmp/generic-attribution": "generic attribution callback",
}
# Connection-level headers (RFC 9110 7.6.1) and the ones the HTTP client sets itself.
_NOT_FORWARDED = frozenset(
    {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer", "trailers",
     "transfer-encoding", "upgrade", "host", "content-length"}
)  # fmt: skip


def forward() -> Response:
    settings = state().settings
    if not settings.passthrough_url:
        raise ApiError(502, "No downstream is configured for provider webhooks (FLOKIT_PASSTHROUGH_URL)")
    headers = {k: v for k, v in request.headers.items() if k.lower() not in _NOT_FORWARDED}
    forwarded_for = request.headers.get("X-Forwarded-For")
    peer = request.remote_addr or ""
    headers["X-Forwarded-For"] = f"{forwarded_for}, {peer}" if forwarded_for else peer
    url = settings.passthrough_url + request.path
    if request.query_string:
        url += "?" + request.query_string.decode("latin-1")
    try:
        answer = session().post(
            url,
            data=request.get_data(cache=False),
            headers=headers,
            timeout=settings.passthrough_timeout_s,
            allow_redirects=False,
        )
    except requests.Timeout:
        raise ApiError(504, f"Downstream timed out after {settings.passthrough_timeout_s:g} s") from None
    except requests.RequestException:
        raise ApiError(502, "Downstream unreachable") from None
    response = Response(answer.content, status=answer.status_code)
    response.headers["Content-Type"] = answer.headers.get("Content-Type", "application/octet-stream")
    return response


for _path, _kind in PATHS.items():
    _view = operation(
        summary=f"Webhook passthrough: {_kind}",
        description="The raw body and the provider's signature headers are forwarded downstream, which "
        "verifies them; its answer is returned as is. 502: downstream unreachable; 504: no answer in 10 s.",
        responses={200: "*/*"},
        errors=(502, 504),
        tags=["passthrough"],
    )(forward)
    blueprint.add_url_rule(
        _path, endpoint=_path.strip("/").replace("/", "_").replace("-", "_"), view_func=_view, methods=["POST"]
    )
