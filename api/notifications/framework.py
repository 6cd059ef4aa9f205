"""The notification processor: verify, store raw, apply once, answer the provider.

Every provider path has a `Handler` (one module per provider, `HANDLER_MODULES`):
- `verify(incoming, ctx)`: authenticate the notification with the provider's own scheme and
  resolve its tenant from verified data only; `Unverified` (401) otherwise. Returns what to
  store under which dedup key, or no key for a notification with nothing to apply (a test).
- `decode(stored, ctx)`: the same, for a notification verified when it was received (replay:
  a Stripe signature's 5-minute tolerance has passed by then, the bytes are ours).
- `effects(verified, ctx)`: what applying it changes; may read the store (Google's
  notifications are only signals). `StoreUnavailable` / `StoreTimeout` become 502 / 504.

`process` stores the verified notification, applies its effects and marks it `applied` in ONE
transaction, and answers 200 only after that committed: an acknowledged notification is always
stored. A failure stores the raw notification with its error (its own transaction) and answers
5xx, so the provider retries; the raw notification stays for `replay`.

What is stored of the request is its body and only the headers and query parameters replay reads
(`kept_for_replay`): never a credential (`Authorization` values, Pub/Sub's OIDC token, the Android
push `?token=`), which whoever reads the database or a backup could forge webhooks with. Every
refusal of an unauthenticated caller (`Unverified`) answers the same text (`NOT_VERIFIED`): which
integration, app or bundle id exists, and why the credential failed, is for the log only. Each
401 counts against the caller's address (api/ratelimits.py `auth_failures`).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlencode

from transforms.client_errors import ClientError, Unavailable
from transforms.entitlements.effects import Effects
from warehouse.db import Database
from warehouse.entitlements import notifications
from warehouse.entitlements.apply import Outcome, apply_effects, apply_received
from warehouse.entitlements.notifications import Received, StoredNotification
from warehouse.settings import Settings

log = logging.getLogger("flokit.processor")

# Provider path -> (provider, module under api.notifications holding `HANDLER`).
HANDLER_MODULES: dict[str, tuple[str, str]] = {
    "/webhooks/ios_store": ("ios_store", "ios_store"),
    "/webhooks/android_store": ("android_store", "android_store"),
    "/webhooks/payment_processor": ("payment_processor", "payment_processor"),
    "/api/providers/subscription_provider_a/webhook": ("subscription_provider_a", "subscription_providers"),
    "/api/providers/subscription_provider_b/webhook": ("subscription_provider_b", "subscription_providers"),
    "/api/providers/generic-subscription/webhook": ("generic-subscription", "generic"),
    "/api/integrations/mmp/generic-attribution": ("generic-attribution", "generic"),
}
PROVIDER_PATHS = {provider: path for path, (provider, _) in HANDLER_MODULES.items()}
# What replay (`Handler.decode`) reads of a request besides its body, per path: header names and
# query parameters. No decode reads either today: each reads the body and the columns verification
# filled (workspace, app, integration), so nothing else is stored. A name added here must be one a
# decode reads, and never a credential (`NEVER_KEPT`).
REPLAY_HEADERS: dict[str, tuple[str, ...]] = {
    "/webhooks/ios_store": (),  # the body's signedPayload, verified again (offline)
    "/webhooks/android_store": (),  # the body; the app from its column (the OIDC token or ?token= said which)
    "/webhooks/payment_processor": (),  # the body; the Stripe-Signature's tolerance has passed on replay
    "/api/providers/subscription_provider_a/webhook": (),  # the body; the integration from its column
    "/api/providers/subscription_provider_b/webhook": (),  # the body; the integration from its column
    "/api/providers/generic-subscription/webhook": (),  # the body; the app from its column
    "/api/integrations/mmp/generic-attribution": (),  # the body; the app from its column
}
REPLAY_QUERY: dict[str, tuple[str, ...]] = {path: () for path in HANDLER_MODULES}  # ?integration=, ?app=: columns
NEVER_KEPT = frozenset({"authorization", "token", "cookie"})
assert REPLAY_HEADERS.keys() == HANDLER_MODULES.keys() == REPLAY_QUERY.keys()
assert not {n.lower() for names in (*REPLAY_HEADERS.values(), *REPLAY_QUERY.values()) for n in names} & NEVER_KEPT
# The one answer to every unauthenticated refusal (401): the reason goes to the log.
NOT_VERIFIED = "Not verified: this notification's credentials do not check out (the processor's log says why)"


class ProcessorError(Exception):
    """Answered with `status` and `{"error": message}` (the gateway's error shape)."""

    status = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Malformed(ProcessorError):
    status = 400


class Unverified(ProcessorError):
    """Not authenticated by the provider's scheme, or no tenant matches: nothing stored or applied."""

    status = 401


class StoreUnavailable(ProcessorError):
    status = 502


class StoreTimeout(ProcessorError):
    status = 504


@contextmanager
def store_errors() -> Iterator[None]:
    """A store client's failures (`transforms.client_errors`) as the processor's, in one place: no answer
    in time is a 504, anything else a store could not do a 502; the message is the client's."""
    try:
        yield
    except Unavailable as e:
        raise (StoreTimeout if e.timed_out else StoreUnavailable)(e.message) from None
    except ClientError as e:
        raise StoreUnavailable(e.message) from None


@dataclass(frozen=True)
class Incoming:
    """A provider's request as the gateway received it: the raw body and the forwarded headers
    (names matched case-insensitively), and the query string."""

    path: str
    body: bytes
    headers: Mapping[str, str]
    query_string: str = ""

    def header(self, name: str) -> str | None:
        wanted = name.lower()
        for key, value in self.headers.items():
            if key.lower() == wanted:
                return value
        return None


def kept_for_replay(incoming: Incoming) -> tuple[dict[str, str], str]:
    """The headers and query string stored with a verified notification: what replay reads of them
    (`REPLAY_HEADERS`, `REPLAY_QUERY`), whichever process received it (the gateway hands over the
    headers it forwards; a processor deployed alone sees all of them)."""
    wanted = {name.lower() for name in REPLAY_HEADERS[incoming.path]}
    headers = {key: value for key, value in incoming.headers.items() if key.lower() in wanted}
    params = set(REPLAY_QUERY[incoming.path])
    pairs = parse_qsl(incoming.query_string, keep_blank_values=True)
    return headers, urlencode([(key, value) for key, value in pairs if key in params])


@dataclass
class Context:
    """What handlers need: settings, the database, and per-process caches (verifiers, clients)."""

    settings: Settings
    database: Database
    cache: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Verified:
    provider: str
    dedup_key: str | None  # None: nothing to apply (a test notification): acknowledged, not stored
    workspace_id: str | None
    app_id: str | None
    integration_id: str | None
    payload: Any  # the decoded notification, in the handler's own types
    note: str = ""


class Handler(Protocol):
    def verify(self, incoming: Incoming, ctx: Context) -> Verified: ...

    def decode(self, stored: StoredNotification, ctx: Context) -> Verified: ...

    def effects(self, verified: Verified, ctx: Context) -> Effects: ...


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, Any]


def handler_for(path: str) -> Handler:
    _, module = HANDLER_MODULES[path]
    found: Handler = importlib.import_module(f"api.notifications.{module}").handler_for(path)
    return found


def process(incoming: Incoming, ctx: Context) -> Answer:
    """Verify, store, apply; the answer the provider gets."""
    provider, _ = HANDLER_MODULES[incoming.path]
    try:
        verified = handler_for(incoming.path).verify(incoming, ctx)
    except ProcessorError as e:
        log.info("notification refused", extra={"provider": provider, "status": e.status, "reason": e.message})
        return Answer(e.status, {"error": NOT_VERIFIED if isinstance(e, Unverified) else e.message})
    if verified.dedup_key is None or verified.workspace_id is None:
        return Answer(200, {"status": "ignored", "reason": verified.note or "nothing to apply"})
    headers, query_string = kept_for_replay(incoming)
    received = Received(
        provider=provider,
        dedup_key=verified.dedup_key,
        workspace_id=verified.workspace_id,
        app_id=verified.app_id,
        integration_id=verified.integration_id,
        body=incoming.body,
        headers=headers,
        query_string=query_string,
    )
    with ctx.database.read() as conn:
        done = notifications.applied_id(
            conn, workspace_id=received.workspace_id, provider=provider, dedup_key=received.dedup_key
        )
    if done is not None:
        return Answer(200, {"status": "duplicate", "notification_id": done})
    try:
        effects = handler_for(incoming.path).effects(verified, ctx)
        outcome = apply_received(ctx.database, received, effects)
    except ProcessorError as e:
        notification_id = notifications.record_failure(ctx.database, received, e.message)
        log.warning("notification not applied", extra={"notification_id": notification_id, "reason": e.message})
        return Answer(e.status if e.status >= 500 else 500, {"error": e.message})
    except Exception as e:  # the provider retries on 5xx; the raw notification waits for replay
        notification_id = notifications.record_failure(ctx.database, received, f"{type(e).__name__}: {e}")
        log.exception("applying a notification failed", extra={"notification_id": notification_id})
        return Answer(500, {"error": "Internal Server Error"})
    if outcome.duplicate:
        return Answer(200, {"status": "duplicate", "notification_id": outcome.notification_id})
    return Answer(200, _applied(outcome))


def _applied(outcome: Outcome) -> dict[str, Any]:
    return {
        "status": "applied",
        "notification_id": outcome.notification_id,
        "purchases_changed": outcome.grants,
        "events_landed": outcome.events_written,
    }


def _apply(verified: Verified, notification_id: str, ctx: Context) -> Answer:
    assert verified.workspace_id is not None
    try:
        effects = handler_for(PROVIDER_PATHS[verified.provider]).effects(verified, ctx)
        outcome = apply_effects(
            ctx.database, workspace_id=verified.workspace_id, effects=effects, notification_id=notification_id
        )
        outcome = Outcome(outcome.grants, outcome.events_written, notification_id)
    except ProcessorError as e:
        notifications.mark_failed(ctx.database, notification_id, e.message)
        return Answer(e.status if e.status >= 500 else 500, {"error": e.message})
    except Exception as e:  # the provider retries on 5xx; the raw notification waits for replay
        log.exception("applying a notification failed", extra={"notification_id": notification_id})
        notifications.mark_failed(ctx.database, notification_id, f"{type(e).__name__}: {e}")
        return Answer(500, {"error": "Internal Server Error"})
    return Answer(200, _applied(outcome))


@dataclass
class Replayed:
    applied: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)


def replay(ctx: Context, *, provider: str, since: datetime, workspace_id: str | None = None) -> Replayed:
    """Apply again every stored notification of `provider` received since `since` (idempotent:
    the ledger keeps the latest statement, events land once)."""
    result = Replayed()
    handler = handler_for(PROVIDER_PATHS[provider])
    after: tuple[datetime, str] | None = None
    while True:
        with ctx.database.read() as conn:
            if workspace_id is None:
                page = notifications.stored_since_for_operator(conn, provider=provider, since=since, after=after)
            else:
                page = notifications.stored_since(
                    conn, provider=provider, since=since, workspace_id=workspace_id, after=after
                )
        if not page:
            return result
        for stored in page:
            after = (stored.received_at, stored.id)
            try:
                verified = handler.decode(stored, ctx)
            except ProcessorError as e:
                result.failed += 1
                result.errors.append(f"{stored.id}: {e.message}")
                continue
            answer = _apply(verified, stored.id, ctx)
            if answer.status == 200:
                result.applied += 1
            else:
                result.failed += 1
                result.errors.append(f"{stored.id}: {answer.body.get('error')}")
