"""`subscription_provider_a` (RevenueCat) and `subscription_provider_b` (Adapty): their webhooks.

Both providers authenticate a webhook only with an `Authorization` header value the operator
types into their dashboard (RevenueCat: "Authorization header value"; Adapty: "Authorization
header value", sent exactly as entered). It is compared in constant time with the
`webhook_authorization` sealed in the integration the URL names; the integration's `app_id`
says which app's ledger the events update. The mappings: `transforms.purchases.subscription_provider_a` and
`transforms.purchases.subscription_provider_b`.

The two webhooks differ only in their event mapping, how an event names its retries (its
dedup key) and RevenueCat's TRANSFER, so one handler serves both, given a `Webhook` that says
those parts: a fix to authentication or replay then reaches both providers at once.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Generic, Protocol, TypeVar

from api.notifications.framework import Context, Handler, Incoming, Malformed, Unverified, Verified
from api.notifications.tenant import Tenant, integration_tenant, tenant_of
from transforms.entitlements.effects import Effect, Effects
from transforms.entitlements.facts import SUBSCRIPTION_PROVIDER_A, SUBSCRIPTION_PROVIDER_B, StoreFact
from transforms.events import CanonicalEvent
from transforms.purchases import subscription_provider_a, subscription_provider_b
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


class _Event(Protocol):
    @property
    def type(self) -> str: ...

    @property
    def at(self) -> datetime: ...


E = TypeVar("E", bound=_Event)
E_in = TypeVar("E_in", bound=_Event, contravariant=True)


class _Events(Protocol[E_in]):
    def __call__(
        self, event: E_in, /, *, workspace_id: str, user_id: str | None, received_at: datetime
    ) -> list[CanonicalEvent]: ...


@dataclass(frozen=True)
class Webhook(Generic[E]):
    """What one provider's webhook has of its own; the rest is `SubscriptionProviderHandler`."""

    provider: str  # the integration type the URL's integration must have, and the facts' source
    parse: Callable[[object], E | None]  # None: a body with no event (nothing to apply)
    not_an_event: type[Exception]  # what `parse` raises for a body that is no event (400)
    # The event's key across retries, from the event and the raw body; None: nothing to apply.
    dedup_key: Callable[[E, bytes], str | None]
    ignored: str  # the note of an event with no dedup key
    fact: Callable[[E], StoreFact | None]
    events: _Events[E]
    # A TRANSFER's previous owners and its new one; None: the event is no transfer.
    transfer: Callable[[E], tuple[Sequence[str], str | None] | None] = lambda _event: None


class SubscriptionProviderHandler(Generic[E]):
    def __init__(self, webhook: Webhook[E]) -> None:
        self.webhook = webhook
        self.provider = webhook.provider

    def _parse(self, body: bytes) -> E | None:
        try:
            return self.webhook.parse(_json(body))
        except self.webhook.not_an_event as e:
            raise Malformed(str(e)) from None

    def verify(self, incoming: Incoming, ctx: Context) -> Verified:
        tenant = tenant_of(incoming, ctx, self.provider)
        app_id = _authorize(incoming, tenant)
        event = self._parse(incoming.body)
        if event is None:
            return Verified(
                self.provider, None, tenant.workspace_id, app_id, tenant.integration_id, None, note="no event"
            )
        dedup = self.webhook.dedup_key(event, incoming.body)
        note = self.webhook.ignored if dedup is None else ""
        return Verified(self.provider, dedup, tenant.workspace_id, app_id, tenant.integration_id, event, note=note)

    def decode(self, stored: StoredNotification, ctx: Context) -> Verified:
        tenant = integration_tenant(ctx, integration_id=stored.integration_id, integration_type=self.provider)
        event = self._parse(stored.body)
        if event is None:
            raise Malformed("The stored notification carries no event")
        app_id = stored.app_id or tenant.app_id
        return Verified(self.provider, stored.dedup_key, stored.workspace_id, app_id, stored.integration_id, event)

    def effects(self, verified: Verified, ctx: Context) -> Effects:
        event: E = verified.payload
        workspace_id, app_id = verified.workspace_id, verified.app_id
        assert workspace_id is not None and app_id is not None
        now = datetime.now(UTC)

        def landed(user: str | None) -> Sequence[CanonicalEvent]:
            return self.webhook.events(event, workspace_id=workspace_id, user_id=user, received_at=now)

        transfer = self.webhook.transfer(event)
        if transfer is not None:
            return self._transfer(event, *transfer, ctx=ctx, workspace_id=workspace_id, app_id=app_id)
        fact = self.webhook.fact(event)
        if fact is None:
            return Effects(events=landed(None), note=f"{event.type}: no purchase state")
        return Effects(effects=[Effect(app_id, fact, landed)], note=f"{event.type} {fact.store_key}")

    def _transfer(
        self, event: E, sources: Sequence[str], to_user: str | None, *, ctx: Context, workspace_id: str, app_id: str
    ) -> Effects:
        """The purchases the ledger links to the previous owners, moved to the new one."""
        if to_user is None:
            return Effects(note=f"{event.type} names no app user to move the purchases to")
        moved: list[Effect] = []
        with ctx.database.read() as conn:
            for user in sources:
                for row in ledger.grants_of(conn, workspace_id=workspace_id, app_id=app_id, user_id=user):
                    if row.source == self.provider and user != to_user:
                        # The purchase's state as the ledger holds it, now stated as moved.
                        held = ledger.fact_of_grant(row)
                        fact = replace(held, stated_at=max(event.at, held.stated_at), user_hint=to_user, transfer=True)
                        moved.append(Effect(app_id, fact))
        return Effects(effects=moved, note=f"{event.type} of {len(moved)} purchase(s) to {to_user}")


def _revenuecat_transfer(event: subscription_provider_a.Event) -> tuple[Sequence[str], str | None] | None:
    return subscription_provider_a.transfer_users(event) if event.type == subscription_provider_a.TRANSFER else None


REVENUECAT = Webhook[subscription_provider_a.Event](
    provider=SUBSCRIPTION_PROVIDER_A,
    parse=subscription_provider_a.parse,
    not_an_event=subscription_provider_a.NotAnEvent,
    # The event's `id` is the same on every retry; a TEST event changes nothing.
    dedup_key=lambda event, _body: None if event.type == subscription_provider_a.TEST else event.id,
    ignored="a TEST event: nothing to apply",
    fact=subscription_provider_a.fact,
    events=subscription_provider_a.events,
    transfer=_revenuecat_transfer,
)
ADAPTY = Webhook[subscription_provider_b.Event](
    provider=SUBSCRIPTION_PROVIDER_B,
    parse=subscription_provider_b.parse,
    not_an_event=subscription_provider_b.NotAnEvent,
    # Adapty's `profile_event_id` is its deduplication id; a body without one is named by its bytes.
    dedup_key=lambda event, body: event.dedup_key or "sha256:" + hashlib.sha256(body).hexdigest(),
    ignored="",
    fact=subscription_provider_b.fact,
    events=subscription_provider_b.events,
)


def handler_for(path: str) -> Handler:
    if "subscription_provider_a" in path:
        return SubscriptionProviderHandler(REVENUECAT)
    return SubscriptionProviderHandler(ADAPTY)
