"""RevenueCat and Adapty webhooks (`/api/providers/subscription_provider_{a,b}/webhook?integration=int_…`).

Both providers authenticate a webhook only with an `Authorization` header value the operator
types into their dashboard (RevenueCat: "Authorization header value"; Adapty: "Authorization
header value", sent exactly as entered). It is compared in constant time with the
`webhook_authorization` sealed in the integration the URL names; the integration's `app_id`
says which app's ledger the events update. The mappings: `transforms.stores.revenuecat` and
`transforms.stores.adapty`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from api.processor.framework import Context, Handler, Incoming, Malformed, Unverified, Verified
from api.processor.tenant import Tenant, integration_tenant, tenant_of
from transforms.entitlements.effects import Effect, Effects
from transforms.entitlements.facts import SUBSCRIPTION_PROVIDER_A, SUBSCRIPTION_PROVIDER_B
from transforms.events import CanonicalEvent
from transforms.stores import adapty, revenuecat
from warehouse.entitlements import ledger
from warehouse.entitlements.notifications import StoredNotification


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (UnicodeDecodeError, ValueError):
        raise Malformed("The body is not JSON") from None


def _authorize(incoming: Incoming, tenant: Tenant) -> str:
    expected = tenant.config.get("webhook_authorization")
    if not isinstance(expected, str) or not expected:
        raise Unverified(
            f"Integration {tenant.integration_id} has no webhook_authorization: connect it again with the "
            "Authorization header value configured in the provider's dashboard"
        )
    given = incoming.header("Authorization") or ""
    if not hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8")):
        raise Unverified("Authorization does not match the integration's webhook_authorization")
    if tenant.app_id is None:
        raise Unverified(f"Integration {tenant.integration_id} has no app_id: its webhook has no ledger to update")
    return tenant.app_id


class RevenueCatHandler:
    provider = SUBSCRIPTION_PROVIDER_A

    def _parse(self, body: bytes) -> revenuecat.Event:
        try:
            return revenuecat.parse(_json(body))
        except revenuecat.NotAnEvent as e:
            raise Malformed(str(e)) from None

    def verify(self, incoming: Incoming, ctx: Context) -> Verified:
        tenant = tenant_of(incoming, ctx, self.provider)
        app_id = _authorize(incoming, tenant)
        event = self._parse(incoming.body)
        dedup = None if event.type == revenuecat.TEST else event.id
        note = "a TEST event: nothing to apply" if dedup is None else ""
        return Verified(self.provider, dedup, tenant.workspace_id, app_id, tenant.integration_id, event, note=note)

    def decode(self, stored: StoredNotification, ctx: Context) -> Verified:
        tenant = integration_tenant(ctx, integration_id=stored.integration_id, integration_type=self.provider)
        event = self._parse(stored.body)
        app_id = stored.app_id or tenant.app_id
        return Verified(self.provider, stored.dedup_key, stored.workspace_id, app_id, stored.integration_id, event)

    def effects(self, verified: Verified, ctx: Context) -> Effects:
        event: revenuecat.Event = verified.payload
        workspace_id, app_id = verified.workspace_id, verified.app_id
        assert workspace_id is not None and app_id is not None
        now = datetime.now(UTC)

        def landed(user: str | None) -> Sequence[CanonicalEvent]:
            return revenuecat.events(event, workspace_id=workspace_id, user_id=user, received_at=now)

        if event.type == revenuecat.TRANSFER:
            return self._transfer(event, ctx, workspace_id, app_id)
        fact = revenuecat.fact(event)
        if fact is None:
            return Effects(events=landed(None), note=f"{event.type}: no purchase state")
        return Effects(effects=[Effect(app_id, fact, landed)], note=f"{event.type} {fact.store_key}")

    def _transfer(self, event: revenuecat.Event, ctx: Context, workspace_id: str, app_id: str) -> Effects:
        """The purchases the ledger links to the previous owners, moved to the new one."""
        sources, to_user = revenuecat.transfer_users(event)
        if to_user is None:
            return Effects(note="TRANSFER names no app user to move the purchases to")
        moved: list[Effect] = []
        with ctx.database.read() as conn:
            for user in sources:
                for row in ledger.grants_of(conn, workspace_id=workspace_id, app_id=app_id, user_id=user):
                    if row.source == self.provider and user != to_user:
                        fact = revenuecat.transfer_fact(
                            dict(row._mapping), store_key=row.store_key, to_user=to_user, at=event.at
                        )
                        moved.append(Effect(app_id, fact))
        return Effects(effects=moved, note=f"TRANSFER of {len(moved)} purchase(s) to {to_user}")


class AdaptyHandler:
    provider = SUBSCRIPTION_PROVIDER_B

    def _parse(self, body: bytes) -> adapty.Event | None:
        try:
            return adapty.parse(_json(body))
        except adapty.NotAnEvent as e:
            raise Malformed(str(e)) from None

    def verify(self, incoming: Incoming, ctx: Context) -> Verified:
        tenant = tenant_of(incoming, ctx, self.provider)
        app_id = _authorize(incoming, tenant)
        event = self._parse(incoming.body)
        if event is None:
            return Verified(
                self.provider, None, tenant.workspace_id, app_id, tenant.integration_id, None, note="no event"
            )
        # Adapty's `profile_event_id` is its deduplication id; a body without one is named by its bytes.
        dedup = event.dedup_key or "sha256:" + hashlib.sha256(incoming.body).hexdigest()
        return Verified(self.provider, dedup, tenant.workspace_id, app_id, tenant.integration_id, event)

    def decode(self, stored: StoredNotification, ctx: Context) -> Verified:
        tenant = integration_tenant(ctx, integration_id=stored.integration_id, integration_type=self.provider)
        event = self._parse(stored.body)
        if event is None:
            raise Malformed("The stored notification carries no event")
        app_id = stored.app_id or tenant.app_id
        return Verified(self.provider, stored.dedup_key, stored.workspace_id, app_id, stored.integration_id, event)

    def effects(self, verified: Verified, ctx: Context) -> Effects:
        event: adapty.Event = verified.payload
        workspace_id, app_id = verified.workspace_id, verified.app_id
        assert workspace_id is not None and app_id is not None
        now = datetime.now(UTC)

        def landed(user: str | None) -> Sequence[CanonicalEvent]:
            return adapty.events(event, workspace_id=workspace_id, user_id=user, received_at=now)

        fact = adapty.fact(event)
        if fact is None:
            return Effects(events=landed(None), note=f"{event.type}: no purchase state")
        return Effects(effects=[Effect(app_id, fact, landed)], note=f"{event.type} {fact.store_key}")


def handler_for(path: str) -> Handler:
    if "subscription_provider_a" in path:
        return RevenueCatHandler()
    return AdaptyHandler()
