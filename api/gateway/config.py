"""GET /api/paywall/config: the live paywall configuration, with the user's A/B variant.

No key is needed (spec: `x-app-key` not needed for config); an identity is. With no published
configuration (or an unknown or revoked app) the answer is the spec's fallback: 200, version 0,
variant `control`, no offers, which tells the app not to show the paywall.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable

from flask import Response, current_app, request
from pydantic import BaseModel, ConfigDict, Field

from api.context import state
from api.gateway import blueprint
from api.gateway.auth import require_user
from api.gateway.experiments import choose, live_experiments
from api.openapi import operation
from api.ratelimits import count_app_client, takes_no_credentials
from api.responses import respond
from api.validators import Id
from transforms import paywall
from transforms.experiments.audience import CONTEXT_HEADERS
from transforms.experiments.serving import served_variant
from warehouse.db import Database
from warehouse.paywalls import configs

CACHE = "flokit.paywall_configs"
# What a config answer varies by besides its URL: the identity, and while an experiment with an
# audience runs on the paywall, the user context the audience reads.
IDENTITY: tuple[str, ...] = ("x-user-id",)
CONTEXT: tuple[str, ...] = CONTEXT_HEADERS
_MAX_ENTRIES = 10_000  # app ids come from clients: a flood of made-up ones must not grow it forever


class LiveConfigs:
    """Each paywall's live configuration, kept `ttl` seconds per worker.

    Config reads are the gateway's hottest path and publishes are rare, so a worker reads the
    database for a (app, paywall) at most once per `ttl`; a new version reaches every worker
    within `ttl` (1 s by default; the spec lets apps cache the answer for 60 s anyway).
    """

    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self._clock = clock  # a test's own clock makes "within ttl" exact, whatever the machine's load
        self._entries: dict[tuple[str, str], tuple[float, configs.Published | None]] = {}
        self._lock = threading.Lock()

    def get(self, db: Database, app_id: str, paywall_id: str) -> configs.Published | None:
        key, now = (app_id, paywall_id), self._clock()
        hit = self._entries.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]
        with db.read() as conn:
            live = configs.live(conn, app_id=app_id, paywall_id=paywall_id)
        if self.ttl > 0:
            with self._lock:
                if len(self._entries) >= _MAX_ENTRIES:
                    self._entries.clear()
                self._entries[key] = (now + self.ttl, live)
        return live


def _live_configs() -> LiveConfigs:
    found = current_app.extensions.get(CACHE)
    if found is None:
        found = current_app.extensions.setdefault(CACHE, LiveConfigs(state().settings.config_cache_s))
    return found


class ConfigQuery(BaseModel):
    model_config = ConfigDict(extra="ignore")
    app_id: Id
    paywall_id: str = Field(min_length=1, max_length=configs.MAX_PAYWALL_ID)
    userId: str | None = Field(None, max_length=200, description="Identity when x-user-id is not sent.")
    anonymousId: str | None = Field(None, max_length=200, description="Identity when neither is sent.")
    # The user context an experiment's audience reads (issue 35); also as headers, see the description.
    country: str | None = Field(None, max_length=64, description="ISO 3166-1 alpha-2 (x-country wins).")
    platform: str | None = Field(None, max_length=64, description="ios, android, web… (or x-platform).")
    app_version: str | None = Field(None, max_length=64, description="e.g. 2.4.1 (or x-app-version).")
    locale: str | None = Field(None, max_length=64, description="BCP 47, e.g. pt-BR (or x-locale).")


class ServedVariant(BaseModel):
    variant_id: str
    layout: str
    offers: list[paywall.Offer] = Field(description="Empty in the fallback: do not show the paywall.")
    cta_copy: str | None = Field(None, exclude_if=lambda v: v is None, description="Absent when the variant has none.")
    traffic_weight: float


class PaywallConfig(BaseModel):
    paywall_id: str
    version: int = Field(description="Published configuration version; 0 for the fallback.")
    variant: ServedVariant
    fallbackUsed: bool  # the spec's name


@blueprint.get("/api/paywall/config")
@takes_no_credentials  # spec: no key; counted per app and client address
@operation(
    summary="Paywall configuration for a user",
    description="The live configuration of the paywall with the user's variant: deterministic per user and "
    "paywall, split by traffic_weight while an experiment is active. With no published configuration: "
    "version 0, variant control, empty offers, fallbackUsed true (do not show the paywall). Cacheable for "
    "60 s (stale for 300 s more), varying by x-user-id; an ETag, and 304 to a matching If-None-Match. "
    "Preview (issue 35): a paywall with experiments (/v1/experiments) is split by them: the first running one "
    "whose audience holds serves the user's sticky variant, read from the user's context: the query "
    "parameters country, platform, app_version, locale or the headers x-country, x-platform, x-app-version, "
    "x-locale, and x-flokit-attributes (a JSON object of custom attributes, at most 2 KB); a malformed context "
    "an audience must read is 400.",
    query=ConfigQuery,
    responses={200: PaywallConfig},
    errors=(400, 401),
    tags=["paywall"],
)
def paywall_config(query: ConfigQuery) -> Response:
    count_app_client(query.app_id)
    user = require_user(query.userId, query.anonymousId)  # spec: the header takes precedence
    db = state().db
    live = _live_configs().get(db, query.app_id, query.paywall_id)
    vary = IDENTITY
    if live is None:
        body = paywall.fallback(query.paywall_id)
    else:
        found = live_experiments().for_paywall(db, query.app_id, query.paywall_id)
        if found.any:  # the experiments split, not the document's experiment_active switch
            assigned = choose(db, found, app_id=query.app_id, user=user)
            if any(audience is not None for _, audience in found.running):
                vary = IDENTITY + CONTEXT
            variant = served_variant(live.document, assigned)
        else:
            variant = paywall.assign_variant(
                live.document, app_id=query.app_id, paywall_id=query.paywall_id, identity=user
            )
        body = paywall.served(query.paywall_id, live.version, variant)
    # The variant depends on the x-user-id header (not part of the URL) and, for an audience, on the
    # context headers. The ETag is the body's: a client holding it gets a 304 (RFC 9110 §13.1.2).
    response = respond(
        PaywallConfig.model_validate(body),
        headers={"Cache-Control": paywall.CACHE_CONTROL, "Vary": ", ".join(vary)},
    )
    return conditional(response)


def conditional(response: Response) -> Response:
    """A strong ETag of the body, and 304 with no body when the request's If-None-Match holds it
    (RFC 9110 §13.1.2: weak comparison, `*` matches). By hand: werkzeug's `add_etag` and
    `make_conditional` cost 60 µs a request (dates, ranges), a fifth of the whole config read."""
    tag = '"' + hashlib.blake2b(response.get_data(), digest_size=16).hexdigest() + '"'
    response.headers["ETag"] = tag
    sent = request.headers.get("If-None-Match")
    if sent and any(t.strip().removeprefix("W/") in (tag, "*") for t in sent.split(",")):
        response.status_code = 304
        response.set_data(b"")
        response.headers.pop("Content-Type", None)
    return response
