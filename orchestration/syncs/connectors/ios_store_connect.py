"""`ios_store_connect` (Apple App Store Server API): Get Notification History, the reconciliation of what the
App Store Server Notifications missed.

The App Store Server API has no listing of every transaction (Get Transaction History is per
customer); the feed-like endpoint is Get Notification History (`POST
/inApps/v1/notifications/history`, body `startDate`/`endDate` in ms, 20 records a page, the
next page by the `paginationToken` query parameter with the SAME body, else
`PaginationTokenExpiredError`; kept 180 days in Production, 30 in Sandbox; design
note §1.7). Each record's `signedPayload` is the notification Apple sent (or tried to send), so
it is verified with Apple's `SignedDataVerifier` for the app (roots `FLOKIT_APPLE_ROOT_CERTS`,
online checks `FLOKIT_APPLE_ONLINE_CHECKS`) and mapped by the notifications' own mapper
(`transforms.purchases.ios_store.notification_effects`): the same facts and the same event ids, so a
notification that did arrive and its history record land once, and re-applying a statement the
ledger has already seen changes nothing (the newest statement wins).

The window runs from the previous sync's `endDate` (`target.state`), less an hour of overlap, to
now (Apple does not say how soon a notification shows in the history, and reading one twice is
harmless); the first sync reads everything Apple keeps. A record whose signature does not verify is
not Apple's word for this app: it is skipped, counted and logged, never applied.

Apple's library, its retries and its errors: `clients.ios_store`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial

from appstoreserverlibrary.api_client import AppStoreServerAPIClient
from appstoreserverlibrary.models.NotificationHistoryRequest import NotificationHistoryRequest
from appstoreserverlibrary.models.NotificationHistoryResponse import NotificationHistoryResponse
from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier, VerificationException, VerificationStatus

from clients.ios_store import AppStoreClient, TokenExpired
from orchestration.syncs.connectors import Connector, Log
from transforms.client_errors import error_for
from transforms.entitlements.effects import Effect, Effects
from transforms.integrations.kinds import ValidConfig, kind_of
from transforms.purchases import ios_store
from warehouse.db import Database, database_for, utcnow
from warehouse.entitlements.apply import apply_effects
from warehouse.entitlements.stores import AppStores, stores_of
from warehouse.integrations.target import SyncTarget
from warehouse.settings import Settings

TYPE = "ios_store_connect"
STATE_KEY = "notification_history"  # state: {"end_ms": the last window's endDate, ...counts}
RETENTION_DAYS = {"Production": 180, "Sandbox": 30}  # Get Notification History's documented reach
# Not the very edge of the retention: Apple's clock and ours differ, and a startDate beyond it is
# refused (StartDateTooFarInPastError, 4000012).
RETENTION_MARGIN = timedelta(minutes=10)
OVERLAP = timedelta(hours=1)
CHECK_SPAN = timedelta(hours=1)
# A pagination token Apple let expire: the window is read again from its start this many times.
RESTARTS = 3


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


@dataclass(kw_only=True)
class AppStoreConnect(AppStoreClient):
    """The integration's In-App Purchase key and app; the App Store client is built per run from
    the app's store identities (bundle id, environment), which live in FloKit's database."""

    app_id: str
    settings: Settings | None = None  # None: the process's environment (`Settings.from_env()`)

    def __repr__(self) -> str:  # never the key
        return f"AppStoreConnect(issuer_id={self.issuer_id!r}, key_id={self.key_id!r}, app_id={self.app_id!r})"

    def process_settings(self) -> Settings:
        if self.settings is None:
            self.settings = Settings.from_env()
        return self.settings

    def stores(self, database: Database, workspace_id: str | None) -> AppStores:
        """The app's store identities; `config` when the app has no App Store bundle id or is
        another workspace's."""
        with database.read() as conn:
            stores = stores_of(conn, self.app_id)
        if stores is None or not stores.ios_bundle_id:
            raise error_for(
                "config",
                f"app {self.app_id} has no App Store bundle id: set it with `flokit admin apps stores --app "
                f"{self.app_id} --ios-bundle-id ... --ios-app-apple-id ... --ios-environment ...`",
            )
        if workspace_id is not None and stores.workspace_id != workspace_id:
            raise error_for("config", f"app {self.app_id} is not an app of this workspace")
        return stores

    def api(self, stores: AppStores) -> AppStoreServerAPIClient:
        assert stores.ios_bundle_id is not None
        return self.api_for(stores.ios_bundle_id, stores.ios_environment or "Production")

    def verifier(self, stores: AppStores) -> SignedDataVerifier:
        settings = self.process_settings()
        roots = []
        for path in settings.apple_root_certs:
            try:
                roots.append(ios_store.der_certificate(path.read_bytes()))
            except (OSError, ValueError) as e:
                raise error_for("config", f"Apple root certificate {path} cannot be read: {e}") from None
        if not roots:
            raise error_for(
                "config", "no Apple root certificates are configured (FLOKIT_APPLE_ROOT_CERTS): nothing can be verified"
            )
        assert stores.ios_bundle_id is not None
        try:
            return ios_store.build_verifier(
                roots,
                bundle_id=stores.ios_bundle_id,
                app_apple_id=stores.ios_app_apple_id,
                environment=stores.ios_environment or "Production",
                online_checks=settings.apple_online_checks,
            )
        except ValueError as e:
            raise error_for("config", f"app {self.app_id}'s App Store settings are incomplete: {e}") from None


def client(config: ValidConfig) -> AppStoreConnect:
    return AppStoreConnect(
        issuer_id=config.get("issuer_id"),
        key_id=config.get("key_id"),
        private_key=config.get("private_key"),
        app_id=config.get("app_id"),
        base_url=config.get("base_url") or kind_of(TYPE).default_base_url,
    )


def check(store: AppStoreConnect) -> str:
    """The notification history of the last hour, one page: the key, the issuer and the bundle id
    are accepted together."""
    settings = store.process_settings()
    stores = store.stores(database_for(settings.database_url), None)
    api = store.api(stores)
    end = utcnow()
    body = NotificationHistoryRequest(startDate=_ms(end - CHECK_SPAN), endDate=_ms(end))
    what = f"reading the notification history of {stores.ios_bundle_id}"
    page = store.call(what, lambda: api.get_notification_history(None, body), lambda _line: None)
    found = len(page.notificationHistory or [])
    more = "+" if page.hasMore else ""
    environment = stores.ios_environment or "Production"
    return (
        f"App Store Server API ({environment}) for {stores.ios_bundle_id}: the key can read the notification "
        f"history; {found}{more} notification(s) in the last hour"
    )


@dataclass
class Tally:
    records: int = 0
    pages: int = 0
    applied: int = 0
    unverified: int = 0
    not_recorded: int = 0
    events: int = 0
    reasons: dict[str, int] = field(default_factory=dict)


def _effects(
    verifier: SignedDataVerifier, signed: str | None, stores: AppStores, received_at: datetime, tally: Tally
) -> Effects | None:
    """One history record's effects, or None when it is not Apple's word for this app (counted)."""
    try:
        if not signed:
            raise VerificationException(VerificationStatus.VERIFICATION_FAILURE)
        notification = verifier.verify_and_decode_notification(signed)
        data = notification.data
        txn = renewal = None
        if data is not None and data.signedTransactionInfo:
            txn = verifier.verify_and_decode_signed_transaction(data.signedTransactionInfo)
        if data is not None and data.signedRenewalInfo:
            renewal = verifier.verify_and_decode_renewal_info(data.signedRenewalInfo)
    except VerificationException as e:
        if e.status == VerificationStatus.RETRYABLE_VERIFICATION_FAILURE:
            raise error_for(
                "provider_error", "Apple's certificate status service (OCSP) could not be reached"
            ) from None
        tally.unverified += 1
        tally.reasons[e.status.name] = tally.reasons.get(e.status.name, 0) + 1
        return None
    try:
        return ios_store.notification_effects(
            notification,
            txn,
            renewal,
            app_id=stores.app_id,
            workspace_id=stores.workspace_id,
            received_at=received_at,
        )
    except ios_store.Unmappable:
        tally.not_recorded += 1
        return None


def sync(store: AppStoreConnect, target: SyncTarget, config: ValidConfig, log: Log) -> None:
    stores = store.stores(target.database, target.workspace_id)
    environment = stores.ios_environment or "Production"
    verifier = store.verifier(stores)
    api = store.api(stores)
    state = dict(target.state.get(STATE_KEY, {}))
    end = target.now
    oldest = end - timedelta(days=RETENTION_DAYS.get(environment, 30)) + RETENTION_MARGIN
    previous = state.get("end_ms")
    start = oldest
    if isinstance(previous, int):
        start = max(oldest, datetime.fromtimestamp(previous / 1000, tz=end.tzinfo) - OVERLAP)
    body = NotificationHistoryRequest(startDate=_ms(start), endDate=_ms(end))
    what = f"reading the notification history of {stores.ios_bundle_id} ({environment})"
    tally = Tally()
    calls_before, limited_before = store.calls, store.rate_limited
    token: str | None = None
    restarts = 0
    while True:
        try:
            page: NotificationHistoryResponse = store.call(
                what, partial(api.get_notification_history, token, body), log
            )
        except TokenExpired as expired:
            if token is None or restarts >= RESTARTS:
                raise error_for("provider_error", f"{what}: {expired}", status=400) from None
            restarts += 1
            log(f"App Store: the pagination token expired; reading the window again from its start ({restarts})")
            token = None
            continue
        tally.pages += 1
        effects: list[Effect] = []
        for record in page.notificationHistory or []:
            tally.records += 1
            found = _effects(verifier, record.signedPayload, stores, target.now, tally)
            if found is not None:
                effects.extend(found.effects)
        if effects:
            outcome = apply_effects(
                target.database,
                workspace_id=target.workspace_id,
                effects=Effects(effects=effects),
                notification_id=None,
            )
            tally.applied += len(effects)
            tally.events += outcome.events_written
            target.records += outcome.events_written
        if not page.hasMore or not page.paginationToken:
            break
        if page.paginationToken == token:
            raise error_for("bad_response", f"{what}: the paginationToken does not move on")
        token = page.paginationToken
    state.update(
        end_ms=_ms(end),
        records=tally.records,
        unverified=tally.unverified,
        requests=store.calls - calls_before,
        rate_limited=store.rate_limited - limited_before,
    )
    target.state[STATE_KEY] = state
    if tally.unverified:
        reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(tally.reasons.items()))
        log(
            f"App Store: skipped {tally.unverified} notification(s) whose signature did not verify for "
            f"{stores.ios_bundle_id} ({reasons}): not Apple's word for this app, not applied"
        )
    log(
        f"App Store notification history of {stores.ios_bundle_id} ({environment}) from {start.isoformat()} to "
        f"{end.isoformat()}: {tally.records} notification(s) on {tally.pages} page(s), {tally.applied} purchase "
        f"statement(s) applied, {tally.events} new event(s), {tally.unverified} skipped (unverified), "
        f"{tally.not_recorded} not recorded (unmappable), {store.calls - calls_before} request(s) "
        f"({store.rate_limited - limited_before} answered 429)"
    )


CONNECTOR = Connector(type=TYPE, client=client, check=check, sync=sync)
