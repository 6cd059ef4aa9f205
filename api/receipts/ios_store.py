"""The App Store: signed data verified with Apple's `app-store-server-library`.

A transaction or notification names its app by bundle id inside the JWS. That claim is read
unverified only to find the app (`app_for_bundle_id`); the app's own settings (bundle id, Apple
id, environment) then build the `SignedDataVerifier` that checks the x5c chain up to the
configured roots (`FLOKIT_APPLE_ROOT_CERTS`), the ES256 signature, and that the signed bundle id
and environment are the app's. Verifiers are cached per app and settings in the context (per
worker process).

With online checks on (`FLOKIT_APPLE_ONLINE_CHECKS`, default), the library asks the OCSP
responders named in the certificates whether they are revoked (its own 30 s timeout, results
cached 15 minutes); an unreachable responder is `StoreUnavailable` (502) and no answer within the
gateway's downstream timeout (10 s) `StoreTimeout` (504). With them off, the chain is checked at
the data's `signedDate`.

A receipt Apple does not vouch for is refused with one text whatever the reason (unknown bundle
id, bad signature, another environment): the reason is logged, never told to the caller.
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from appstoreserverlibrary.models.JWSTransactionDecodedPayload import JWSTransactionDecodedPayload
from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier, VerificationException, VerificationStatus

from api.notifications.framework import Context, StoreTimeout, StoreUnavailable
from api.receipts import ReceiptRejected, VerifiedPurchase
from transforms.entitlements.effects import Effect
from transforms.events import CanonicalEvent
from transforms.purchases import ios_store
from warehouse.db import utcnow
from warehouse.entitlements.stores import AppStores, app_for_bundle_id

log = logging.getLogger("flokit.stores")

# The one answer to a transaction Apple does not vouch for here, whatever the reason (logged).
NOT_VOUCHED = "The App Store does not vouch for this transaction for an app set up here (the gateway's log says why)"
ROOTS = "ios_store.roots"
VERIFIERS = "ios_store.verifiers"
T = TypeVar("T")
# Online checks block on Apple's OCSP responders: run them off the request thread so the answer
# can come back at the timeout (the library's own request timeout is 30 s).
_OCSP_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="apple-ocsp")


class NotVerifiable(Exception):
    """Apple does not vouch for this data for any app here (the message says why)."""


@dataclass(frozen=True)
class AppVerifier:
    stores: AppStores
    verifier: SignedDataVerifier
    online: bool


def root_certificates(ctx: Context) -> tuple[bytes, ...]:
    """The configured roots as DER, read once per process."""
    found = ctx.cache.get(ROOTS)
    if found is None:
        roots = []
        for path in ctx.settings.apple_root_certs:
            try:
                roots.append(ios_store.der_certificate(path.read_bytes()))
            except (OSError, ValueError) as e:
                raise NotVerifiable(f"Apple root certificate {path} cannot be read: {e}") from None
        found = ctx.cache[ROOTS] = tuple(roots)
    assert isinstance(found, tuple)
    return found


def verifier_for(ctx: Context, jws: str, *, online: bool) -> AppVerifier:
    """The verifier of the app the (unverified) data names, or `NotVerifiable`."""
    bundle_id = ios_store.peek_bundle_id(jws)
    if bundle_id is None:
        raise NotVerifiable("Not App Store signed data: no bundle id in the payload")
    with ctx.database.read() as conn:
        stores = app_for_bundle_id(conn, bundle_id)
    if stores is None or stores.ios_bundle_id is None:
        raise NotVerifiable(f"No app is set up for the bundle id {bundle_id!r} (no tenant provisioned)")
    roots = root_certificates(ctx)
    if not roots:
        raise NotVerifiable("No Apple root certificates are configured (FLOKIT_APPLE_ROOT_CERTS)")
    environment = stores.ios_environment or "Production"
    key = (stores.app_id, stores.ios_bundle_id, stores.ios_app_apple_id, environment, online, roots)
    cache: dict[tuple[object, ...], SignedDataVerifier] = ctx.cache.setdefault(VERIFIERS, {})
    verifier = cache.get(key)
    if verifier is None:
        try:
            verifier = ios_store.build_verifier(
                roots,
                bundle_id=stores.ios_bundle_id,
                app_apple_id=stores.ios_app_apple_id,
                environment=environment,
                online_checks=online,
            )
        except ValueError as e:
            raise NotVerifiable(f"The app's App Store settings are incomplete: {e}") from None
        for stale in [k for k in cache if k[0] == stores.app_id and k[4] == online]:
            del cache[stale]  # the app's settings changed: one verifier per app (and mode)
        cache[key] = verifier
    return AppVerifier(stores, verifier, online)


def checked(app: AppVerifier, call: Callable[[], T], *, timeout_s: float) -> T:
    """Run a verification; the library's verdicts as FloKit's errors."""
    try:
        if not app.online:
            return call()
        return _OCSP_POOL.submit(call).result(timeout=timeout_s)
    except concurrent.futures.TimeoutError:
        raise StoreTimeout("Apple's certificate status service (OCSP) did not answer in time") from None
    except VerificationException as e:
        raise _refusal(e, app.stores) from None


def _refusal(e: VerificationException, stores: AppStores) -> Exception:
    if e.status == VerificationStatus.RETRYABLE_VERIFICATION_FAILURE:
        return StoreUnavailable("Apple's certificate status service (OCSP) could not be reached")
    if e.status == VerificationStatus.INVALID_APP_IDENTIFIER:
        return NotVerifiable(f"Signed for another app than {stores.ios_bundle_id} (app {stores.app_id})")
    if e.status == VerificationStatus.INVALID_ENVIRONMENT:
        env = stores.ios_environment or "Production"
        return NotVerifiable(f"Signed for another App Store environment than the app's ({env})")
    if e.status in (VerificationStatus.INVALID_CHAIN_LENGTH, VerificationStatus.INVALID_CERTIFICATE):
        return NotVerifiable("The App Store certificate chain is malformed")
    return NotVerifiable("The App Store signature or certificate chain is not valid")


def events_of(
    txn: JWSTransactionDecodedPayload, *, workspace_id: str, received_at: datetime
) -> Callable[[str | None], list[CanonicalEvent]]:
    def events(user_id: str | None) -> list[CanonicalEvent]:
        return ios_store.transaction_events(txn, workspace_id=workspace_id, received_at=received_at, user_id=user_id)

    return events


def verify_receipt(ctx: Context, signed_transaction_info: str) -> VerifiedPurchase:
    """A `signedTransactionInfo` the app shows. A genuine transaction that lapsed or was refunded
    is a success (its fact says it grants nothing now)."""
    try:
        app = verifier_for(ctx, signed_transaction_info, online=ctx.settings.apple_online_checks)
        txn = checked(
            app,
            lambda: app.verifier.verify_and_decode_signed_transaction(signed_transaction_info),
            timeout_s=ctx.settings.passthrough_timeout_s,
        )
        fact = ios_store.transaction_fact(txn)
    except NotVerifiable as e:  # the same answer whatever failed: no caller learns which bundle ids are set up
        log.info("receipt refused", extra={"provider": "ios_store", "reason": str(e)})
        raise ReceiptRejected(NOT_VOUCHED) from None
    except ios_store.Unmappable as e:  # verified: the caller holds a genuine transaction of an app here
        raise ReceiptRejected(str(e)) from None
    stores = app.stores
    effect = Effect(stores.app_id, fact, events_of(txn, workspace_id=stores.workspace_id, received_at=utcnow()))
    return VerifiedPurchase(stores, effect)
