"""Provider webhooks, forwarded downstream as they came: the raw body bytes, the provider's
signature headers, the query string. The downstream service verifies the signatures, so nothing
here may change a byte the signature covers.

Only the headers a provider needs cross (`FORWARDED_HEADERS`, one row per path): the body's
content type and encoding, the user agent, and that provider's own signature or `Authorization`
header. Nothing else a caller sends reaches the downstream (cookies, FloKit's own `x-app-key`,
`x-app-token`, `x-user-id`, hop-by-hop fields, the caller's `Forwarded`/`X-Forwarded-*`/
`X-Real-Ip`): FloKit writes `X-Forwarded-For`, `-Host` and `-Proto` itself from what it saw,
believing a proxy's values only for `FLOKIT_TRUSTED_PROXIES` hops (as the ingest allowlist does).

The downstream's answer goes back to the provider as is (status, body, content type), so a
provider that retries on failure retries exactly when the downstream failed. Unreachable: 502;
no answer within the timeout (10 s): 504. Nothing is stored here: the provider's own retry is
the durability.
"""

from __future__ import annotations

import requests
from flask import Response, request
from urllib3.util import SKIP_HEADER

from api.context import state
from api.errors import ApiError
from api.notifications.routes import handle
from api.openapi import operation
from api.passthrough import blueprint
from api.ratelimits import count_failure, per_address
from clients.downstream import session
from transforms.ingest.network import client_address

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
# Request headers forwarded on each path, besides `_EVERY_PATH` (spelling is what the downstream
# sees; matching is case-insensitive). Sources and the choices for the generic paths:
# docs/spec-decisions.md "Passthrough request headers".
# FloKit's own processor verifies the generic paths with its `Service-Signature` scheme.
_GENERIC = ("Authorization", "Service-Signature", "webhook-id", "webhook-timestamp", "webhook-signature")
FORWARDED_HEADERS: dict[str, tuple[str, ...]] = {
    # Stripe: `Stripe-Signature: t=…,v1=…` (HMAC-SHA256 over "t.body").
    "/webhooks/payment_processor": ("Stripe-Signature",),
    # App Store Server Notifications V2: the body is `{"signedPayload": "<JWS>"}`; no signature header.
    "/webhooks/ios_store": (),
    # Google Play RTDN by Pub/Sub push: an authenticated subscription sends `Authorization: Bearer <OIDC JWT>`.
    "/webhooks/android_store": ("Authorization",),
    # RevenueCat: the `Authorization` value configured in its dashboard; `X-RevenueCat-Signature` where sent.
    "/api/providers/subscription_provider_a/webhook": ("Authorization", "X-RevenueCat-Signature"),
    # Adapty: the `Authorization` value configured in its dashboard, sent exactly as entered.
    "/api/providers/subscription_provider_b/webhook": ("Authorization",),
    # Generic senders: a configured `Authorization`, or Standard Webhooks signatures.
    "/api/providers/generic-subscription/webhook": _GENERIC,
    "/api/integrations/mmp/generic-attribution": _GENERIC,
}  # fmt: skip
# What every path forwards: how to read the body, and who says they sent it.
_EVERY_PATH = ("Content-Type", "Content-Encoding", "User-Agent")
assert FORWARDED_HEADERS.keys() == PATHS.keys()


def _forwarded_headers(path: str, trusted_proxies: int) -> dict[str, str]:
    """The headers sent downstream: the path's allowlist as the caller sent it, then FloKit's own
    forwarding headers. A repeated field arrives joined by the WSGI server (", "), as RFC 9110 allows."""
    # A field the caller names in Connection is hop-by-hop (RFC 9110 7.6.1): never forwarded.
    hop = {t.strip().lower() for t in request.headers.get("Connection", "").split(",")}
    headers: dict[str, str] = {}
    for name in (*_EVERY_PATH, *FORWARDED_HEADERS.get(path, ())):
        value = request.headers.get(name)
        if value is not None and name.lower() not in hop:
            headers[name] = value
    # No user agent sent: none is invented either (urllib3 would add "python-urllib3/…").
    headers.setdefault("User-Agent", SKIP_HEADER)
    address = client_address(request.remote_addr, request.headers.get("X-Forwarded-For"), trusted_proxies)
    if address:
        headers["X-Forwarded-For"] = address
    headers["X-Forwarded-Host"] = from_proxies("X-Forwarded-Host", request.host, trusted_proxies)
    headers["X-Forwarded-Proto"] = from_proxies("X-Forwarded-Proto", request.scheme, trusted_proxies)
    return headers


def from_proxies(name: str, seen: str, trusted_proxies: int) -> str:
    """What the outermost trusted proxy wrote in `name` (the Nth value from the right, as werkzeug's
    ProxyFix reads it), else what FloKit itself saw; a caller's own value is never believed."""
    if trusted_proxies:
        values = [v.strip() for v in request.headers.get(name, "").split(",")]
        if len(values) >= trusted_proxies and values[-trusted_proxies]:
            return values[-trusted_proxies]
    return seen


def forward() -> Response:
    settings = state().settings
    rule = request.url_rule.rule if request.url_rule else request.path
    headers = _forwarded_headers(rule, settings.trusted_proxies)
    if not settings.passthrough_url:  # FloKit's own processor, in-process: same bytes, same headers
        if headers.get("User-Agent") is SKIP_HEADER:
            del headers["User-Agent"]
        return _counted(handle(rule, request.get_data(cache=False), headers, request.query_string.decode("latin-1")))
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
    return _counted(response)


def _counted(response: Response) -> Response:
    """The processor refused the provider's credential (401): counted against the caller's address
    here, where its address is known (a processor deployed alone sees the gateway as its caller)."""
    if response.status_code == 401:
        count_failure()
    return response


for _path, _kind in PATHS.items():
    # Downstream verifies the provider's credential: counted per address, and its 401s count as
    # failed authentications (past the limit: 429 before anything is forwarded).
    _view = per_address(
        operation(
            summary=f"Webhook passthrough: {_kind}",
            description="The raw body and the provider's signature headers are forwarded downstream, which "
            "verifies them; its answer is returned as is. 401: the provider's credential refused (a failed "
            "authentication of the caller's address: past the limit, 429). 502: downstream unreachable; 504: no "
            "answer in 10 s.",
            responses={200: "*/*"},
            errors=(401, 502, 504),
            tags=["passthrough"],
        )(forward),
        credentials=True,
    )
    blueprint.add_url_rule(
        _path, endpoint=_path.strip("/").replace("/", "_").replace("-", "_"), view_func=_view, methods=["POST"]
    )
