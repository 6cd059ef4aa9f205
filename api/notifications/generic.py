"""`generic-subscription` and `generic-attribution` (FloKit's own formats, no vendor): the generic
billing and attribution systems FloKit has no adapter for.

`?app=app_…` names the app; the request is authenticated with FloKit's `Service-Signature`
scheme (HMAC-SHA256 over `<t>.<body>`, `t` in Unix milliseconds, 5 minutes' tolerance), checked
by the reference verifier `transforms.webhooks.verify` under the app's generic secret
(`flokit admin apps stores --app APP --new-generic-secret`). An unknown app, an app without a
generic secret and a bad signature are all 401: the app id alone proves nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from api.notifications.framework import Context, Handler, Incoming, Malformed, ProcessorError, Unverified, Verified
from api.notifications.tenant import query_value
from transforms.entitlements.effects import Effect, Effects
from transforms.events import CanonicalEvent
from transforms.ingest.attribution import Dropped
from transforms.purchases import generic
from transforms.webhooks.verify import verify as verify_signature
from warehouse import fx
from warehouse.entitlements import stores
from warehouse.entitlements.notifications import StoredNotification

SIGNATURE_HEADER = "Service-Signature"
SUBSCRIPTION = "generic-subscription"
ATTRIBUTION = "generic-attribution"


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (UnicodeDecodeError, ValueError):
        raise Malformed("The body is not JSON") from None


class GenericHandler:
    def __init__(self, provider: str) -> None:
        self.provider = provider

    def _parse(self, body: bytes) -> tuple[str, Any]:
        raw = _json(body)
        try:
            if self.provider == SUBSCRIPTION:
                event = generic.parse_subscription(raw)
                return event.id, event
            return generic.attribution_id(raw), raw
        except generic.Invalid as e:
            raise Malformed(str(e)) from None

    def verify(self, incoming: Incoming, ctx: Context) -> Verified:
        app_id = query_value(incoming.query_string, "app")
        if not app_id:
            raise Unverified("The URL must name the app: ?app=app_…")
        if ctx.settings.instance_key is None:
            raise ProcessorError("No instance key is configured: the app's generic secret cannot be read")
        with ctx.database.read() as conn:
            found = stores.stores_of(conn, app_id)
            secret = (
                stores.generic_secret(conn, app_id=app_id, instance_key=ctx.settings.instance_key)
                if found is not None
                else None
            )
        if found is None or secret is None:
            raise Unverified(f"App {app_id} is unknown or has no generic secret")
        verdict = verify_signature(
            incoming.body, incoming.header(SIGNATURE_HEADER), [secret], time.time_ns() // 1_000_000
        )
        if not verdict:
            raise Unverified(f"{SIGNATURE_HEADER} not verified: {verdict.reason}")
        dedup, payload = self._parse(incoming.body)
        return Verified(self.provider, dedup, found.workspace_id, app_id, None, payload)

    def decode(self, stored: StoredNotification, ctx: Context) -> Verified:
        _, payload = self._parse(stored.body)
        return Verified(self.provider, stored.dedup_key, stored.workspace_id, stored.app_id, None, payload)

    def effects(self, verified: Verified, ctx: Context) -> Effects:
        workspace_id, app_id = verified.workspace_id, verified.app_id
        assert workspace_id is not None and app_id is not None
        now = datetime.now(UTC)
        if self.provider == SUBSCRIPTION:
            event: generic.SubscriptionEvent = verified.payload

            def landed(user: str | None) -> Sequence[CanonicalEvent]:
                return generic.subscription_events(event, workspace_id=workspace_id, user_id=user, received_at=now)

            fact = generic.subscription_fact(event)
            return Effects(effects=[Effect(app_id, fact, landed)], note=f"{event.type} {event.purchase_id}")
        mapped = generic.attribution_event(
            verified.payload,
            app_id=app_id,
            workspace_id=workspace_id,
            received_at=now,
            latest_rates=fx.latest_rates(ctx.settings.paths),
        )
        if isinstance(mapped, Dropped):
            return Effects(note=f"attribution event dropped: {mapped.reason}")
        return Effects(events=[mapped], note=f"attribution {mapped.event_type}")


def handler_for(path: str) -> Handler:
    return GenericHandler(SUBSCRIPTION if "generic-subscription" in path else ATTRIBUTION)
