"""`ios_store` (Apple App Store): its signed data, once Apple's library verified it, as ledger facts and events.

What the App Store signs (decoded by `app-store-server-library` into `JWSTransactionDecodedPayload`
and `JWSRenewalInfoDecodedPayload`; https://developer.apple.com/documentation/appstoreserverapi/
jwstransactiondecodedpayload and .../jwsrenewalinfodecodedpayload):
- a transaction is one period of a subscription or one purchase: `transactionId`, the lasting
  `originalTransactionId` (the same for every renewal: FloKit's `store_key`), `type`,
  `purchaseDate`, `expiresDate`, `price` in milliunits and `currency`, `offerType` /
  `offerDiscountType` of the offer applied to *this* period, `revocationDate` /
  `revocationReason` / `revocationType` / `revocationPercentage` after a refund or a Family
  Sharing revocation, `appAccountToken`, `inAppOwnershipType`, `environment`, `signedDate`;
- the renewal info says what happens next: `autoRenewStatus`, `gracePeriodExpiresDate` while the
  App Store retries billing with access kept, the offer of the *next* renewal.

Trial conversions: nothing in a renewal's transaction names the previous period's offer (its
offer fields describe its own period; the renewal info's the next one), so a later transaction
of a subscription is booked as a `renewal`, never as `trial_converted`; the first transaction
(transactionId == originalTransactionId) is `trial_start` or `subscription_start`. Telling a
conversion apart would need the transaction history (App Store Server API) or the ledger's
previous state, and either would give the same transaction different event ids on different
paths (receipt, notification, notification history), which landing could then count twice.

Every event names its purchase: `purchase_key` is the `originalTransactionId` (the ledger's
`store_key`; an upgrade or crossgrade is a new transaction on the same one), `transaction_id` the
transaction (a refund's is the refunded transaction). A subscription period's event carries its
`expiresDate` as `period_ends_at`; a transaction states no period length, so no
`billing_period` (subscription metrics take it from the catalog or the period's length). The
fact states the transaction's `price` (milliunits, as major units) and `currency` as the
purchase's latest paid price, at its `purchaseDate`: none for a free trial or a free period.

Events are not booked for sandbox transactions (tests, not revenue; the Adapty and RevenueCat
mappings leave sandbox out too), nor for Family Sharing transactions (the purchaser's own
transaction carries the money; a family member's would count it again).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from appstoreserverlibrary.models.Environment import Environment
from appstoreserverlibrary.models.JWSRenewalInfoDecodedPayload import JWSRenewalInfoDecodedPayload
from appstoreserverlibrary.models.JWSTransactionDecodedPayload import JWSTransactionDecodedPayload
from appstoreserverlibrary.models.NotificationTypeV2 import NotificationTypeV2
from appstoreserverlibrary.models.ResponseBodyV2DecodedPayload import ResponseBodyV2DecodedPayload
from appstoreserverlibrary.models.Subtype import Subtype
from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from transforms import event_types as t
from transforms.entitlements.effects import Effect, Effects
from transforms.entitlements.facts import IOS_STORE, Kind, StoreFact
from transforms.entitlements.facts import Environment as FactEnvironment
from transforms.events import CanonicalEvent, canonical_event
from transforms.purchases import event_ids
from transforms.timefmt import iso_z

ID_PREFIX = "ios"
ENVIRONMENTS = ("Production", "Sandbox")  # what an app can be set to (Xcode/LocalTesting are unsigned)

KINDS: dict[str, Kind] = {
    "Auto-Renewable Subscription": "subscription",
    "Non-Renewing Subscription": "subscription",
    "Non-Consumable": "lifetime",
    "Consumable": "consumable",
}
AUTO_RENEWABLE = "Auto-Renewable Subscription"
FAMILY_SHARED = "FAMILY_SHARED"
INTRODUCTORY_OFFER = 1
FREE_TRIAL = "FREE_TRIAL"
PERCENT_MILLIUNITS = 100_000  # `revocationPercentage` 100 % (milliunits of a percent)

# Notifications that change nothing: Apple asks for consumption data, or checks the URL.
NOTHING_TO_APPLY = frozenset({NotificationTypeV2.TEST.value, NotificationTypeV2.CONSUMPTION_REQUEST.value})


class Unmappable(ValueError):
    """Verified data FloKit cannot turn into a fact (an unknown product type, no expiry)."""


def der_certificate(data: bytes) -> bytes:
    """A root certificate file's bytes (Apple publishes DER `.cer`; PEM accepted) as DER, the
    form the library loads. ValueError when it is neither."""
    if b"-----BEGIN" in data:
        return x509.load_pem_x509_certificate(data).public_bytes(Encoding.DER)
    x509.load_der_x509_certificate(data)
    return data


def build_verifier(
    roots: Sequence[bytes], *, bundle_id: str, app_apple_id: int | None, environment: str, online_checks: bool
) -> SignedDataVerifier:
    """Apple's verifier for one app: the x5c chain up to `roots` (DER), ES256, the app's bundle
    id, and (in Production, which requires it) its Apple id. ValueError for an environment other
    than Production or Sandbox, or Production without the app's Apple id."""
    if environment not in ENVIRONMENTS:
        raise ValueError(f"environment must be Production or Sandbox, not {environment!r}")
    return SignedDataVerifier(list(roots), online_checks, Environment(environment), bundle_id, app_apple_id)


def _claims(jws: str) -> dict[str, Any] | None:
    parts = jws.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (binascii.Error, ValueError):
        return None
    return claims if isinstance(claims, dict) else None


def peek_bundle_id(jws: str) -> str | None:
    """The bundle id an UNVERIFIED transaction or notification claims: only to find the app whose
    settings then verify it (whose bundle id the library checks against the signed one)."""
    claims = _claims(jws)
    if claims is None:
        return None
    if isinstance(claims.get("bundleId"), str):
        return str(claims["bundleId"])
    for part in ("data", "summary", "externalPurchaseToken", "appData"):
        inner = claims.get(part)
        if isinstance(inner, dict) and isinstance(inner.get("bundleId"), str):
            return str(inner["bundleId"])
    return None


def moment(ms: int | None) -> datetime | None:
    """Apple's times: milliseconds since the epoch."""
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=UTC)


def is_free_trial(txn: JWSTransactionDecodedPayload) -> bool:
    """A free-trial period: the offer's payment mode says so (`offerDiscountType`, since 2024), or,
    in payloads from before that field, an introductory offer that cost nothing."""
    if txn.rawOfferDiscountType is not None:
        return txn.rawOfferDiscountType == FREE_TRIAL
    return txn.rawOfferType == INTRODUCTORY_OFFER and txn.price == 0


def _environment(raw: str | None) -> FactEnvironment:
    if raw == "Production":
        return "production"
    if raw == "Sandbox":
        return "sandbox"
    raise Unmappable(f"transactions of the {raw!r} environment are not recorded")


def _revocation_reason(txn: JWSTransactionDecodedPayload) -> str | None:
    if txn.revocationDate is None:
        return None
    if txn.rawRevocationType is not None:
        return txn.rawRevocationType  # REFUND_FULL, REFUND_PRORATED, FAMILY_REVOKE
    reasons = {0: "REFUNDED_FOR_OTHER_REASON", 1: "REFUNDED_DUE_TO_ISSUE"}
    return reasons.get(txn.rawRevocationReason, "REVOKED") if txn.rawRevocationReason is not None else "REVOKED"


def transaction_fact(
    txn: JWSTransactionDecodedPayload, renewal: JWSRenewalInfoDecodedPayload | None = None
) -> StoreFact:
    """The purchase's state as this transaction (and the subscription's renewal info, when the
    App Store sent it along) states it."""
    if not txn.originalTransactionId or not txn.transactionId:
        raise Unmappable("the transaction carries no transaction ids")
    kind = KINDS.get(txn.rawType or "")
    if kind is None:
        raise Unmappable(f"unknown product type {txn.rawType!r}")
    if renewal is not None and renewal.originalTransactionId != txn.originalTransactionId:
        raise Unmappable("the renewal info is about another purchase than the transaction")
    signed = [s for s in (txn.signedDate, renewal.signedDate if renewal else None) if s is not None]
    if not signed:
        raise Unmappable("the transaction carries no signedDate")
    expires = moment(txn.expiresDate)
    if kind == "subscription" and expires is None:
        raise Unmappable(f"a {txn.rawType} transaction without an expiresDate")
    subscription = txn.rawType == AUTO_RENEWABLE
    price = paid_price(txn)
    auto_renew = None
    if subscription and renewal is not None and renewal.rawAutoRenewStatus is not None:
        auto_renew = renewal.rawAutoRenewStatus == 1
    return StoreFact(
        source=IOS_STORE,
        store_key=txn.originalTransactionId,
        product_id=txn.productId,
        kind=kind,
        channel="iap",
        environment=_environment(txn.rawEnvironment),
        stated_at=moment(max(signed)),  # type: ignore[arg-type]
        expires_at=expires if kind == "subscription" else None,
        grace_ends_at=moment(renewal.gracePeriodExpiresDate) if subscription and renewal else None,
        revoked_at=moment(txn.revocationDate),
        revocation_reason=_revocation_reason(txn),
        in_trial=is_free_trial(txn),
        auto_renew=auto_renew,
        account_token=txn.appAccountToken.lower() if txn.appAccountToken else None,
        transaction_id=txn.transactionId,
        price_amount=price[0] if price else None,
        price_currency=price[1] if price else None,
        priced_at=moment(txn.purchaseDate) if price else None,
    )


def paid_price(txn: JWSTransactionDecodedPayload) -> tuple[float, str] | None:
    """What the transaction's buyer paid (major units, ISO 4217); None for a free trial, a free
    period or a transaction that names no price."""
    if txn.price is None or txn.price <= 0 or not txn.currency or is_free_trial(txn):
        return None
    return txn.price / 1000, txn.currency.upper()


def event_id(transaction_id: str, event_type: str) -> str:
    """`ios:<transactionId>:<type>`, or a digest of the id should it ever make that too long."""
    return event_ids.event_id(ID_PREFIX, transaction_id, event_type)


def period_event_type(txn: JWSTransactionDecodedPayload) -> str:
    """What the transaction's own period is (see the module's note on trial conversions)."""
    if txn.rawType != AUTO_RENEWABLE:
        return t.PURCHASE  # consumable, non-consumable, non-renewing: one charge
    if txn.transactionId == txn.originalTransactionId:
        return t.TRIAL_START if is_free_trial(txn) else t.SUBSCRIPTION_START
    return t.RENEWAL


def _money(txn: JWSTransactionDecodedPayload, share: int = PERCENT_MILLIUNITS) -> dict[str, Any]:
    if txn.price is None or not txn.currency:
        return {}
    return {"revenue": round(txn.price * share / PERCENT_MILLIUNITS / 1000, 3), "currency": txn.currency.upper()}


def transaction_events(
    txn: JWSTransactionDecodedPayload,
    *,
    workspace_id: str,
    received_at: datetime,
    user_id: str | None,
    cancelled_at: datetime | None = None,
) -> list[CanonicalEvent]:
    """The canonical events of one verified transaction: its period (or one-time purchase), a
    refund when it was revoked (the refunded share of its price, negative), and a cancellation
    when the caller saw auto-renew turned off. The same transaction gives the same ids from a
    receipt, any notification about it, or the notification history."""
    if txn.rawEnvironment != "Production" or txn.rawInAppOwnershipType == FAMILY_SHARED:
        return []
    if not txn.transactionId or txn.purchaseDate is None:
        return []
    kind = period_event_type(txn)
    base: dict[str, Any] = {
        "product_id": txn.productId,
        "store": "app_store",
        "transaction_id": txn.transactionId,
        "original_transaction_id": txn.originalTransactionId,
        "purchase_key": txn.originalTransactionId,
        "storefront": txn.storefront,
        "offer_type": txn.rawOfferType,
        "offer_discount_type": txn.rawOfferDiscountType,
    }
    base = {k: v for k, v in base.items() if v is not None}

    def event(event_type: str, at: datetime, props: dict[str, Any]) -> CanonicalEvent:
        assert txn.transactionId is not None
        return canonical_event(
            source=IOS_STORE,
            workspace_id=workspace_id,
            event_type=event_type,
            occurred_at=at,
            received_at=received_at,
            event_id=event_id(txn.transactionId, event_type),
            platform="ios",
            user_id=user_id,
            properties=props,
        )

    purchased = moment(txn.purchaseDate)
    assert purchased is not None
    period: dict[str, Any] = {}
    if kind != t.PURCHASE and txn.expiresDate is not None:
        period = {"period_ends_at": iso_z(moment(txn.expiresDate))}
    events = [event(kind, purchased, base | period if kind == t.TRIAL_START else base | period | _money(txn))]
    revoked = moment(txn.revocationDate)
    if revoked is not None and kind != t.TRIAL_START:
        refunded = _money(txn, txn.revocationPercentage or PERCENT_MILLIUNITS)
        if "revenue" in refunded:
            refunded["revenue"] = -refunded["revenue"]
        reason = _revocation_reason(txn)
        events.append(event(t.REFUND, revoked, base | refunded | ({"reason": reason} if reason else {})))
    if cancelled_at is not None and txn.rawType == AUTO_RENEWABLE:
        events.append(event(t.CANCELLATION, cancelled_at, base))
    return events


def notification_effects(
    notification: ResponseBodyV2DecodedPayload,
    txn: JWSTransactionDecodedPayload | None,
    renewal: JWSRenewalInfoDecodedPayload | None,
    *,
    app_id: str,
    workspace_id: str,
    received_at: datetime,
) -> Effects:
    """What an App Store Server Notification V2 changes, from its verified transaction and renewal
    info. Every notification that carries a transaction restates the purchase (SUBSCRIBED,
    DID_RENEW, OFFER_REDEEMED, DID_CHANGE_RENEWAL_PREF, RENEWAL_EXTENDED: a new period or expiry;
    DID_FAIL_TO_RENEW: billing retry, with `gracePeriodExpiresDate` when the GRACE_PERIOD subtype
    keeps access; EXPIRED, GRACE_PERIOD_EXPIRED: the end has passed; REFUND, REVOKE: revoked;
    REFUND_REVERSED: no longer revoked; DID_CHANGE_RENEWAL_STATUS: auto-renew, a `cancellation`
    event when turned off): the ledger keeps the newest statement. TEST and CONSUMPTION_REQUEST
    change nothing, nor do the notifications without a transaction (summaries, external
    purchase tokens)."""
    kind = notification.rawNotificationType or "?"
    label = kind + (f"/{notification.rawSubtype}" if notification.rawSubtype else "")
    if kind in NOTHING_TO_APPLY:
        return Effects(note=f"{label}: nothing to apply")
    if txn is None:
        return Effects(note=f"{label}: no transaction to apply")
    fact = transaction_fact(txn, renewal)
    cancelled_at = None
    if kind == NotificationTypeV2.DID_CHANGE_RENEWAL_STATUS.value and (
        notification.rawSubtype == Subtype.AUTO_RENEW_DISABLED.value
    ):
        cancelled_at = moment(notification.signedDate) or fact.stated_at

    def events(user_id: str | None) -> list[CanonicalEvent]:
        assert txn is not None
        return transaction_events(
            txn, workspace_id=workspace_id, received_at=received_at, user_id=user_id, cancelled_at=cancelled_at
        )

    return Effects(effects=[Effect(app_id, fact, events)], note=label)
