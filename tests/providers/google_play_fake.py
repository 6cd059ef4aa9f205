"""A fake Google Play Developer API, OAuth token endpoint and OIDC certificate endpoint on 127.0.0.1.

Real HTTP with the documented shapes, so FloKit runs Google's own client libraries against it:
- `POST /token`: the service account's JWT-bearer grant (RFC 7523, as `google-auth` sends it:
  `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`, `assertion`). The assertion is
  verified with the public key of the key pair the fake generated for the service account
  (signature, `iss` = the account's e-mail, `aud` = Google's token URI, the androidpublisher
  scope); an access token is issued, and the API accepts only issued tokens (401 otherwise).
- The API paths as the discovery document (`androidpublisher.v3.json`, shipped with
  google-api-python-client) builds them: `purchases.subscriptionsv2.get`, `purchases.products.get`,
  the two `:acknowledge` calls (recorded, and the purchase becomes acknowledged), and
  `purchases.voidedpurchases.list` (`VoidedPurchasesListResponse`: `voidedPurchases`,
  `tokenPagination.nextPageToken`; `startTime` filters on `voidedTimeMillis` and is ignored once a
  page `token` is given; `type=0` leaves subscriptions out; quantity-based partial refunds, the
  resources with `voidedQuantity`, only with `includeQuantityBasedPartialRefund=true`;
  `voided_page_cap` answers fewer than `maxResults`, as Google may). An unknown token answers Google's error shape
  `{"error": {"code": 404, "message", "status": "NOT_FOUND"}}`.
- Failures: `fail_next` answers the next API calls with these statuses (and headers, e.g.
  `Retry-After`) in turn; `api_status` answers every API call with that status.
- `GET /oauth2/v1/certs`: `{key id: PEM certificate}` like Google's, with Google's
  `Cache-Control: public, max-age=<certs_max_age>, must-revalidate, no-transform`, for OIDC id
  tokens the fake mints as Pub/Sub would (`mint_id_token`); `calls.certs` counts the fetches.
`delay_s` holds every API answer that long (a store that is silent).
"""

from __future__ import annotations

import base64
import json
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import unquote

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from google.auth import crypt, jwt
from werkzeug.wrappers import Request, Response

from tests.providers.serving import ThreadedFake

GOOGLE_TOKEN_AUDIENCE = "https://oauth2.googleapis.com/token"  # what google-auth puts in `aud`
SCOPE = "https://www.googleapis.com/auth/androidpublisher"
API = "/androidpublisher/v3/applications/"
OIDC_KID = "fake-oidc-key-1"
PUSH_EMAIL = "pubsub-push@flokit-test.iam.gserviceaccount.com"


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _rsa_pem() -> tuple[rsa.RSAPrivateKey, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    return key, pem


def subscription(
    state: str,
    *,
    expires: datetime,
    product: str = "pro_monthly",
    order: str = "GPA.3301-0000-1111-22222",
    started: datetime | None = None,
    auto_renew: bool = True,
    acknowledged: bool = False,
    account_id: str | None = None,
    linked: str | None = None,
    test: bool = False,
    free_trial: bool = False,
    canceled: dict[str, Any] | None = None,
    price: tuple[str, int, str] | None = ("9", 990000000, "EUR"),
) -> dict[str, Any]:
    """A `SubscriptionPurchaseV2` as `purchases.subscriptionsv2.get` answers it."""
    item: dict[str, Any] = {
        "productId": product,
        "expiryTime": rfc3339(expires),
        "latestSuccessfulOrderId": order,
        "offerDetails": {"basePlanId": "monthly", "offerTags": []},
        "autoRenewingPlan": {"autoRenewEnabled": auto_renew},
        "offerPhase": {"freeTrial": {}} if free_trial else {"basePrice": {}},
    }
    if price is not None:
        item["autoRenewingPlan"]["recurringPrice"] = {"units": price[0], "nanos": price[1], "currencyCode": price[2]}
    if free_trial:
        item["offerDetails"]["offerId"] = "trial-7d"
    body: dict[str, Any] = {
        "kind": "androidpublisher#subscriptionPurchaseV2",
        "regionCode": "DE",
        "startTime": rfc3339(started or expires - timedelta(days=30)),
        "subscriptionState": state,
        "latestOrderId": order,
        "acknowledgementState": "ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED"
        if acknowledged
        else "ACKNOWLEDGEMENT_STATE_PENDING",
        "lineItems": [item],
    }
    if account_id is not None:
        body["externalAccountIdentifiers"] = {"obfuscatedExternalAccountId": account_id}
    if linked is not None:
        body["linkedPurchaseToken"] = linked
    if test:
        body["testPurchase"] = {}
    if canceled is not None:
        body["canceledStateContext"] = canceled
    return body


def voided(
    token: str,
    order: str,
    *,
    voided_at: datetime,
    purchased: datetime | None = None,
    reason: int = 1,
    source: int = 0,
) -> dict[str, Any]:
    """A `VoidedPurchase` as `purchases.voidedpurchases.list` answers it."""
    return {
        "kind": "androidpublisher#voidedPurchase",
        "purchaseToken": token,
        "orderId": order,
        "purchaseTimeMillis": str(int((purchased or voided_at - timedelta(days=5)).timestamp() * 1000)),
        "voidedTimeMillis": str(int(voided_at.timestamp() * 1000)),
        "voidedSource": source,
        "voidedReason": reason,
    }


def product(
    *,
    product_id: str = "lifetime_unlock",
    order: str = "GPA.3301-9999-8888-77777",
    state: int = 0,
    consumed: bool = False,
    acknowledged: bool = False,
    purchased: datetime | None = None,
    account_id: str | None = None,
) -> dict[str, Any]:
    """A `ProductPurchase` as `purchases.products.get` answers it."""
    body: dict[str, Any] = {
        "kind": "androidpublisher#productPurchase",
        "purchaseTimeMillis": str(int((purchased or datetime.now(UTC)).timestamp() * 1000)),
        "purchaseState": state,
        "consumptionState": 1 if consumed else 0,
        "orderId": order,
        "acknowledgementState": 1 if acknowledged else 0,
        "productId": product_id,
        "regionCode": "DE",
    }
    if account_id is not None:
        body["obfuscatedExternalAccountId"] = account_id
    return body


@dataclass
class Calls:
    tokens_issued: int = 0
    token_refused: int = 0
    gets: list[str] = field(default_factory=list)
    voided_lists: list[dict[str, str]] = field(default_factory=list)  # each list call's query
    acknowledged: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, product, token)
    certs: int = 0  # GET /oauth2/v1/certs


class FakeGooglePlay(ThreadedFake):
    """`with FakeGooglePlay(package) as play:` serves until the block ends; `play.subscriptions`
    and `play.products` hold what the API answers, keyed by purchase token."""

    def __init__(
        self, package: str = "com.acme.fit", *, client_email: str = "play@flokit-test.iam.gserviceaccount.com"
    ):
        self.package = package
        self.client_email = client_email
        self.subscriptions: dict[str, dict[str, Any]] = {}
        self.products: dict[tuple[str, str], dict[str, Any]] = {}
        self.calls = Calls()
        self.delay_s = 0.0
        self.acknowledge_status: int | None = None  # answer acknowledgements with this error status
        self.voided: list[dict[str, Any]] = []  # VoidedPurchase resources, oldest first
        self.voided_subscription_tokens: set[str] = set()  # which voided tokens are subscriptions (type=0)
        self.voided_page_cap = 1000
        self.fail_next: list[tuple[int, dict[str, str]]] = []
        self.api_status: int | None = None
        self.certs_max_age = 21_600  # seconds; Google's answers say a few hours
        self._issued: set[str] = set()
        self._lock = threading.Lock()
        self._account_key, self._account_pem = _rsa_pem()
        self._oidc_key, self._oidc_pem = _rsa_pem()
        self._oidc_cert = _self_signed(self._oidc_key)

    # -- what FloKit is configured with --------------------------------------------------------

    @property
    def api_url(self) -> str:
        return self.url + "/"

    @property
    def certs_url(self) -> str:
        return self.url + "/oauth2/v1/certs"

    def service_account_info(self, *, private_key: str | None = None) -> dict[str, Any]:
        """The key file a Google Cloud service account downloads (`type: service_account`)."""
        return {
            "type": "service_account",
            "project_id": "flokit-test",
            "private_key_id": "0123456789abcdef",
            "private_key": private_key or self._account_pem,
            "client_email": self.client_email,
            "client_id": "100000000000000000001",
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": self.url + "/token",
        }

    def mint_id_token(
        self,
        audience: str,
        *,
        email_verified: bool = True,
        issuer: str = "https://accounts.google.com",
        expires_in: int = 3600,
        key: rsa.RSAPrivateKey | None = None,
        email: str = PUSH_EMAIL,
        kid: str = OIDC_KID,
    ) -> str:
        """An OIDC id token as Pub/Sub's push signs it (claims per Cloud Pub/Sub's
        "Authentication for push subscriptions")."""
        now = int(time.time())
        pem = self._oidc_pem
        if key is not None:
            pem = key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            ).decode()
        signer = crypt.RSASigner.from_string(pem, key_id=kid)
        claims = {
            "aud": audience,
            "azp": "100000000000000000002",
            "email": email,
            "email_verified": email_verified,
            "iat": now - 10 if expires_in > 0 else now - 7200,
            "exp": now + expires_in,
            "iss": issuer,
            "sub": "100000000000000000002",
        }
        return jwt.encode(signer, claims).decode()

    # -- serving -------------------------------------------------------------------------------

    @staticmethod
    def _json(status: int, body: dict[str, Any]) -> Response:
        return Response(json.dumps(body), status=status, content_type="application/json; charset=UTF-8")

    @classmethod
    def _error(cls, code: int, status: str, message: str, headers: dict[str, str] | None = None) -> Response:
        response = cls._json(code, {"error": {"code": code, "message": message, "status": status,
                                              "errors": [{"message": message, "domain": "global"}]}})  # fmt: skip
        for name, value in (headers or {}).items():
            response.headers[name] = value
        return response

    # Google's canonical error statuses and messages for the injected failures.
    _FAILURES = {
        401: ("UNAUTHENTICATED", "Request had invalid authentication credentials."),
        403: ("PERMISSION_DENIED", "The current user has insufficient permissions to perform the requested operation."),
        429: ("RESOURCE_EXHAUSTED", "Quota exceeded for quota metric 'Queries' and limit 'Queries per minute'."),
        500: ("INTERNAL", "Internal error encountered."),
        503: ("UNAVAILABLE", "The service is currently unavailable."),
    }

    def _failure(self, status: int, headers: dict[str, str] | None = None) -> Response:
        name, message = self._FAILURES.get(status, ("UNKNOWN", "Unknown error."))
        return self._error(status, name, message, headers)

    def _respond(self, request: Request) -> Response:
        if request.path == "/token" and request.method == "POST":
            return self._token(request)
        if request.path == "/oauth2/v1/certs":
            with self._lock:
                self.calls.certs += 1
            response = self._json(200, {OIDC_KID: self._oidc_cert})
            response.headers["Cache-Control"] = f"public, max-age={self.certs_max_age}, must-revalidate, no-transform"
            return response
        if not request.path.startswith(API):
            return self._error(404, "NOT_FOUND", "Not Found")
        auth = request.headers.get("Authorization", "")
        if not auth.startswith("Bearer ") or auth[7:] not in self._issued:
            return self._error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
        with self._lock:
            injected = self.fail_next.pop(0) if self.fail_next else None
        if injected is not None:
            return self._failure(*injected)
        if self.api_status is not None:
            return self._failure(self.api_status)
        if self.delay_s:
            time.sleep(self.delay_s)
        parts = [unquote(p) for p in request.path[len(API) :].split("/")]
        if parts[0] != self.package or parts[1] != "purchases":
            return self._error(403, "PERMISSION_DENIED", "The caller does not have permission")
        if request.method == "GET" and parts[2:] == ["voidedpurchases"]:
            return self._voided_list(dict(request.args))
        return self._purchases(request.method, parts[2:])

    def _voided_list(self, query: dict[str, str]) -> Response:
        with self._lock:
            self.calls.voided_lists.append(query)
            size = min(int(query.get("maxResults", 1000)), self.voided_page_cap)
            if "token" in query:
                offset, start = (int(x) for x in base64.urlsafe_b64decode(query["token"]).decode().split(":"))
            else:
                offset, start = 0, int(query.get("startTime", 0))
            kinds = int(query.get("type", 0))
            partial = query.get("includeQuantityBasedPartialRefund") == "true"
            matching = [
                v for v in self.voided
                if int(v["voidedTimeMillis"]) >= start
                and (kinds == 1 or v["purchaseToken"] not in self.voided_subscription_tokens)
                and (partial or "voidedQuantity" not in v)
            ]  # fmt: skip
            page = matching[offset : offset + size]
            body: dict[str, Any] = {
                "pageInfo": {"totalResults": len(matching), "resultPerPage": len(page), "startIndex": offset},
                "voidedPurchases": page,
            }
            if offset + size < len(matching):
                token = base64.urlsafe_b64encode(f"{offset + size}:{start}".encode()).decode()
                body["tokenPagination"] = {"nextPageToken": token}
        return self._json(200, body)

    def _purchases(self, method: str, parts: list[str]) -> Response:
        with self._lock:
            if method == "GET" and parts[0] == "subscriptionsv2" and parts[1] == "tokens":
                self.calls.gets.append(f"subscriptionsv2:{parts[2]}")
                found = self.subscriptions.get(parts[2])
                if found is None:
                    return self._error(404, "NOT_FOUND", "The purchase token was not found.")
                return self._json(200, found)
            if parts[0] in ("products", "subscriptions") and parts[2] == "tokens":
                kind, product_id = parts[0], parts[1]
                token, _, action = parts[3].partition(":")
                if method == "GET" and kind == "products" and not action:
                    self.calls.gets.append(f"products:{product_id}:{token}")
                    found = self.products.get((product_id, token))
                    if found is None:
                        return self._error(404, "NOT_FOUND", "The purchase token was not found.")
                    return self._json(200, found)
                if method == "POST" and action == "acknowledge":
                    return self._acknowledge(kind, product_id, token)
        return self._error(404, "NOT_FOUND", "Not Found")

    def _acknowledge(self, kind: str, product_id: str, token: str) -> Response:
        if self.acknowledge_status is not None:
            return self._error(self.acknowledge_status, "UNAVAILABLE", "The service is currently unavailable.")
        if kind == "subscriptions":
            sub = self.subscriptions.get(token)
            if sub is None or sub["lineItems"][0]["productId"] != product_id:
                return self._error(404, "NOT_FOUND", "The purchase token was not found.")
            if sub["acknowledgementState"] == "ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED":
                return self._error(400, "FAILED_PRECONDITION", "The subscription purchase is already acknowledged.")
            sub["acknowledgementState"] = "ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED"
        else:
            one = self.products.get((product_id, token))
            if one is None:
                return self._error(404, "NOT_FOUND", "The purchase token was not found.")
            one["acknowledgementState"] = 1
        self.calls.acknowledged.append((kind, product_id, token))
        return Response(status=204)  # "If successful, the response body is empty."

    def _token(self, request: Request) -> Response:
        form = request.form
        public = self._account_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        try:
            if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
                raise ValueError("unsupported grant_type")
            claims = jwt.decode(form.get("assertion", ""), certs=public.decode(), audience=GOOGLE_TOKEN_AUDIENCE)
            if claims.get("iss") != self.client_email or SCOPE not in str(claims.get("scope", "")).split():
                raise ValueError("wrong issuer or scope")
        except ValueError:
            with self._lock:
                self.calls.token_refused += 1
            return self._json(400, {"error": "invalid_grant", "error_description": "Invalid JWT Signature."})
        access = "ya29.fake-" + base64.urlsafe_b64encode(time.time_ns().to_bytes(8, "big")).decode().rstrip("=")
        with self._lock:
            self._issued.add(access)
            self.calls.tokens_issued += 1
        return self._json(200, {"access_token": access, "expires_in": 3599, "token_type": "Bearer"})


def _self_signed(key: rsa.RSAPrivateKey) -> str:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fake-google-oidc")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=30))
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def push_body(notification: dict[str, Any], message_id: str, *, publish_time: datetime | None = None) -> bytes:
    """A Pub/Sub push request's body carrying a developer notification."""
    data = base64.b64encode(json.dumps(notification).encode()).decode()
    published = rfc3339(publish_time or datetime.now(UTC))
    message = {"data": data, "messageId": message_id, "message_id": message_id, "publishTime": published,
               "publish_time": published, "attributes": {}}  # fmt: skip
    return json.dumps({"message": message, "subscription": "projects/flokit-test/subscriptions/play-rtdn"}).encode()


def developer_notification(package: str, **kind: Any) -> dict[str, Any]:
    """A `DeveloperNotification` (`subscriptionNotification=...`, `voidedPurchaseNotification=...`)."""
    return {"version": "1.0", "packageName": package, "eventTimeMillis": str(int(time.time() * 1000)), **kind}


INSTANCE_KEY = "i" * 43
PUSH_AUDIENCE = "https://flokit.test/webhooks/android_store"


def settings_for(settings: Any, play: FakeGooglePlay, *, timeout_s: float = 10.0) -> Any:
    """The gateway's settings pointed at the fake (`FLOKIT_GOOGLE_PLAY_API_URL`,
    `FLOKIT_GOOGLE_OIDC_CERTS_URL`), with an instance key to seal the service account under.
    The timeout is the spec's 10 s unless a test's point is the timeout: on a loaded machine a
    first call (a token exchange, then the purchase) took 1.2 s and a 1 s bound made it a 504."""
    from dataclasses import replace

    return replace(
        settings,
        instance_key=INSTANCE_KEY,
        google_play_api_url=play.api_url,
        google_oidc_certs_url=play.certs_url,
        passthrough_timeout_s=timeout_s,
    )


def provision(
    db: Any,
    app_id: str,
    play: FakeGooglePlay,
    *,
    account: dict[str, Any] | None = None,
    push_service_account: str | None = PUSH_EMAIL,
) -> str:
    """Set the app's Android identities as `flokit admin apps stores` does (the push subscription's
    audience and service account: `mint_id_token`'s defaults); the push token made."""
    from warehouse.entitlements.stores import StoresUpdate, set_stores

    update = StoresUpdate(
        android_package=play.package,
        android_service_account_json=json.dumps(account or play.service_account_info()),
        android_push_audience=PUSH_AUDIENCE,
        android_push_service_account=push_service_account,
        new_android_push_token=True,
    )
    with db.write() as conn:
        made = set_stores(conn, app_id=app_id, update=update, instance_key=INSTANCE_KEY)
    assert made.android_push_token is not None
    return made.android_push_token
