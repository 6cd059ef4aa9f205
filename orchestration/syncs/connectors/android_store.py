"""`android_store` (Google Play): what the real-time developer notifications missed, reconciled.

Google has no method that lists an app's subscriptions (design/integrations.md §1.8), so the
sync reconciles what it can name, with the app's own service account (`flokit admin apps
stores --android-service-account`, sealed in `app_stores`; the integration names the app):
- `purchases.voidedpurchases.list` (`type=1`: subscriptions too; `maxResults=1000`, token
  paging): each voided purchase is revoked, with its `refund` event, exactly as a
  `voidedPurchaseNotification` of it would be (`transforms.purchases.android_store.voided_effect`,
  the same fact and event id, so a notification and a sync of one void land once). Google
  filters `startTime` on when its systems saw the void, not on the `voidedTimeMillis` it
  answers, and never further back than 30 days: the cursor is the previous sync's start, an
  overlap of a day earlier (re-applying a void changes nothing).
- The purchases whose access ends within `REREAD_WINDOW` of now (ended or about to) are read
  again with `purchases.subscriptionsv2.get` and applied like a notification's read: a renewal
  the notifications missed extends access, an expiry ends it.

The list answers no product type: a token the ledger does not hold is looked up as a
subscription (to find its chain's first token, as the notification path does), and one Google
knows no subscription for is recorded as a voided one-time product. Subscriptions replaced by
an upgrade or downgrade stay keyed under their chain's first token, which Google then answers
as replaced; the re-read asks for the grant's `current_token` instead, the newest token a
receipt, notification or sync read of it (Google links tokens only backwards, so a successor
the ledger never heard of cannot be found from it: the read answers replaced, and the purchase
is counted as such and left to the notifications).

Calls are paced evenly under `requests_per_minute` (Google's default quota: 3000 queries a
minute per bucket). A 429 waits what `Retry-After` says (else backs off) within a retry
budget, then fails `rate_limited`; a 5xx or a timeout is retried, then `provider_error`;
401/403, or a token endpoint that refuses the key, fail `auth` with Google's own words; an app
without a package or service account fails `config`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from clients import android_store as play_api
from clients.android_store import PlayApi
from clients.http import Pacer
from orchestration.syncs.connectors import Connector, Log
from transforms.client_errors import error_for
from transforms.entitlements.effects import Effect, Effects
from transforms.entitlements.facts import ANDROID_STORE
from transforms.integrations.kinds import ValidConfig
from transforms.purchases import android_store as gp
from transforms.sealing import SealError
from warehouse.db import Database, database_for
from warehouse.entitlements import ledger, stores
from warehouse.entitlements.apply import apply_effects
from warehouse.entitlements.expiring import grants_ending_between
from warehouse.integrations.target import SyncTarget
from warehouse.settings import Settings

VOIDED_HORIZON = timedelta(days=30)  # how far back Google lets startTime reach
# Our clock and Google's differ: a startTime of exactly 30 days ago could be refused as older.
HORIZON_MARGIN = timedelta(minutes=10)
CURSOR_OVERLAP = timedelta(days=1)
REREAD_WINDOW = timedelta(days=3)
APPLY_BATCH = 100  # purchases applied per transaction (a failure mid-way keeps what was applied)
STATE_KEY = "google_play"
CURSOR = "voided_since"  # ISO time: the start of the last successful sync
FULL_REFUND = 1  # voidedPurchaseNotification.refundType REFUND_TYPE_FULL_REFUND
PACING_MARGIN = 0.97


@dataclass
class PlayClient:
    """The integration's client: its app and pace. The app's credentials live in the database,
    sealed under the instance key, so the API is bound to them (`bind`) where those are known:
    the sync's target, or this process's settings for `--check`."""

    app_id: str
    base_url: str
    requests_per_minute: int = 2900
    timeout_s: float = 60.0
    backoff_s: float = 1.0
    _pacer: Pacer | None = field(default=None, repr=False)

    def pacer(self) -> Pacer:
        if self._pacer is None:
            self._pacer = Pacer(self.requests_per_minute * PACING_MARGIN)
        return self._pacer

    def bind(self, database: Database, instance_key: str | None, *, workspace_id: str | None, log: Log) -> PlayApi:
        """The API as the app's service account, or `config` when the app is not set up for it."""
        setup = f"set them with `flokit admin apps stores --app {self.app_id} --android-package ... "
        setup += "--android-service-account KEY.json`"
        if not instance_key:
            raise error_for("config", "no instance key here to unseal the app's Google service account")
        try:
            with database.read() as conn:
                app = stores.stores_of(conn, self.app_id)
                info = stores.android_credentials(conn, app_id=self.app_id, instance_key=instance_key)
        except SealError as e:
            raise error_for(
                "config", f"the app's Google service account cannot be unsealed with this instance key ({e}); {setup}"
            ) from None
        if app is None or (workspace_id is not None and app.workspace_id != workspace_id):
            raise error_for("config", f"app {self.app_id} has no store identities in this workspace; {setup}")
        if not app.android_package or info is None:
            raise error_for("config", f"app {self.app_id} has no Android package or service account; {setup}")
        try:
            credentials, service = play_api.service_for(
                info, api_url=self.base_url.rstrip("/") + "/", timeout=self.timeout_s
            )
        except ValueError as e:
            raise error_for("config", f"the app's Google service account key cannot be used: {e}; {setup}") from None
        return PlayApi(
            package=app.android_package, credentials=credentials, service=service, pacer=self.pacer(),
            backoff_s=self.backoff_s, timeout_s=self.timeout_s, log=log,
        )  # fmt: skip


def client(config: ValidConfig) -> PlayClient:
    return PlayClient(
        app_id=config.get("app_id"),
        base_url=config.get("base_url"),
        requests_per_minute=config.get("requests_per_minute") or 2900,
    )


def check(play: PlayClient) -> str:
    """One voided-purchases page of one: the key signs, the app is reachable, the account may read
    financial data. Run by the CLI, so the app's credentials come from this process's settings."""
    settings = Settings.from_env()
    api = play.bind(database_for(settings.database_url), settings.instance_key, workspace_id=None, log=lambda _l: None)
    start = datetime.now(UTC) - VOIDED_HORIZON + HORIZON_MARGIN
    first = next(api.voided_pages(start, page_size=1))
    found = "voided purchases in the last 30 days" if first else "no voided purchase in the last 30 days"
    return f"Google Play app {api.package}: the service account can read its purchases; {found}"


def _voided_effect(api: PlayApi, target: SyncTarget, app_id: str, item: Mapping[str, Any]) -> Effect | None:
    """A listed voided purchase as the effect its `voidedPurchaseNotification` would have."""
    token = item.get("purchaseToken")
    if not isinstance(token, str) or not token:
        return None
    voided_at = gp.parse_millis(item.get("voidedTimeMillis")) or target.now

    def held(key: str) -> str | None:
        with target.database.read() as conn:
            grant = ledger.grant_for(conn, app_id=app_id, source=ANDROID_STORE, store_key=key)
        return None if grant is None else str(grant.store_key)

    key, product_type, purchase = token, None, None
    if held(token) is None:
        purchase = api.subscription(token)
        if purchase is None:
            product_type = gp.VOIDED_ONE_TIME  # Google knows no subscription with this token
        else:
            product_type = gp.VOIDED_SUBSCRIPTION

            def linked_of(linked: str) -> object:
                found = api.subscription(linked)
                return None if found is None else found.get("linkedPurchaseToken")

            key = gp.resolve_store_key(token, purchase, held=held, linked_of=linked_of)
    with target.database.read() as conn:
        grant = ledger.grant_for(conn, app_id=app_id, source=ANDROID_STORE, store_key=key)
    # A token read and not replaced is the subscription's newest.
    current = token if purchase is not None and not gp.replaced(purchase) else None
    order = item.get("orderId") if isinstance(item.get("orderId"), str) and item.get("orderId") else None
    return gp.voided_effect(
        ledger.fact_of_grant(grant) if grant is not None else None,
        app_id=app_id,
        workspace_id=target.workspace_id,
        store_key=key,
        product_type=product_type,
        voided_at=voided_at,
        # Without includeQuantityBasedPartialRefund the list holds full voids only.
        refund_type=FULL_REFUND,
        order_id=order,
        received_at=target.now,
        current_token=current,
    )


def _reread_effect(api: PlayApi, target: SyncTarget, app_id: str, grant: Any) -> tuple[Effect | None, str]:
    """A known subscription as Google states it now (as a notification's read would apply it),
    read by its newest token the ledger knows (`current_token`; the key for a grant that has
    none)."""
    store_key = str(grant.store_key)
    token = str(grant.current_token or store_key)
    purchase = api.subscription(token)
    if purchase is None:
        return None, "unknown"
    if gp.replaced(purchase):
        return None, "replaced"
    try:
        fact = gp.subscription_fact(purchase, store_key=store_key, token=token, stated_at=target.now)
    except gp.UnexpectedPayload as e:
        raise error_for("bad_response", f"Google Play answered an unreadable subscription: {e}") from None

    def events(user: str | None) -> list[Any]:
        return gp.subscription_events(
            purchase, fact, workspace_id=target.workspace_id, user_id=user, received_at=target.now
        )

    return Effect(app_id, fact, events), "read"


def _apply(target: SyncTarget, effects: list[Effect]) -> int:
    if not effects:
        return 0
    outcome = apply_effects(
        target.database, workspace_id=target.workspace_id, effects=Effects(effects=effects), notification_id=None
    )
    target.records += outcome.events_written
    return outcome.grants


def sync(play: PlayClient, target: SyncTarget, config: ValidConfig, log: Log) -> None:
    api = play.bind(target.database, target.instance_key, workspace_id=target.workspace_id, log=log)
    app_id = play.app_id
    state: dict[str, Any] = dict(target.state.get(STATE_KEY) or {})
    horizon = target.now - VOIDED_HORIZON + HORIZON_MARGIN
    since = horizon
    if isinstance(state.get(CURSOR), str):
        since = max(horizon, datetime.fromisoformat(state[CURSOR]) - CURSOR_OVERLAP)
    voided = changed = 0
    for page in api.voided_pages(since):
        effects = [e for e in (_voided_effect(api, target, app_id, item) for item in page) if e is not None]
        voided += len(effects)
        changed += _apply(target, effects)

    with target.database.read() as conn:
        due = grants_ending_between(
            conn, app_id=app_id, source=ANDROID_STORE, start=target.now - REREAD_WINDOW, end=target.now + REREAD_WINDOW
        )
    counts = {"read": 0, "replaced": 0, "unknown": 0}
    batch: list[Effect] = []
    for grant in due:
        effect, outcome = _reread_effect(api, target, app_id, grant)
        counts[outcome] += 1
        if effect is not None:
            batch.append(effect)
        if len(batch) >= APPLY_BATCH:
            changed += _apply(target, batch)
            batch = []
    changed += _apply(target, batch)

    target.state[STATE_KEY] = {
        CURSOR: target.now.isoformat(),
        "voided": voided,
        "reread": counts["read"],
        "requests": api.calls,
        "rate_limited": api.rate_limited,
    }
    log(
        f"Google Play app {api.package}: {voided} voided purchase(s) since {since.isoformat()}, "
        f"{len(due)} purchase(s) ending within {REREAD_WINDOW.days} days re-read ({counts['replaced']} replaced, "
        f"{counts['unknown']} unknown to Google), {changed} grant(s) changed, {target.records} new event(s), "
        f"{api.calls} request(s) ({api.rate_limited} answered 429)"
    )


CONNECTOR = Connector(type=ANDROID_STORE, client=client, check=check, sync=sync)
