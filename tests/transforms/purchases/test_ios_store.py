"""The App Store's verified payloads as facts and events: decoded by Apple's own verifier from JWS
this test's PKI signs (online checks off), then mapped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from appstoreserverlibrary.models.JWSRenewalInfoDecodedPayload import JWSRenewalInfoDecodedPayload
from appstoreserverlibrary.models.JWSTransactionDecodedPayload import JWSTransactionDecodedPayload
from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier

from tests.providers.apple_pki import APP_APPLE_ID, BUNDLE_ID, DAY_MS, ApplePki, now_ms, renewal, transaction
from transforms.purchases import ios_store
from transforms.timefmt import iso_z

RECEIVED = datetime(2026, 11, 24, tzinfo=UTC)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> ApplePki:
    return ApplePki(tmp_path_factory.mktemp("apple"))


@pytest.fixture(scope="module")
def verifier(pki: ApplePki) -> SignedDataVerifier:
    return ios_store.build_verifier(
        [pki.root_path.read_bytes()],
        bundle_id=BUNDLE_ID,
        app_apple_id=APP_APPLE_ID,
        environment="Production",
        online_checks=False,
    )


def txn(pki: ApplePki, verifier: SignedDataVerifier, **fields: Any) -> JWSTransactionDecodedPayload:
    return verifier.verify_and_decode_signed_transaction(pki.transaction(**fields))


def info(pki: ApplePki, verifier: SignedDataVerifier, **fields: Any) -> JWSRenewalInfoDecodedPayload:
    return verifier.verify_and_decode_renewal_info(pki.renewal(**fields))


def events(t: JWSTransactionDecodedPayload, **kw: Any) -> list[tuple[str, str, dict[str, Any]]]:
    found = ios_store.transaction_events(t, workspace_id="ws_1", received_at=RECEIVED, user_id="u1", **kw)
    return [(e.event_id, e.event_type, e.properties) for e in found]


def test_root_certificates_are_read_as_der_or_pem(pki: ApplePki, tmp_path: Path) -> None:
    der = pki.root_path.read_bytes()
    assert ios_store.der_certificate(der) == der
    assert ios_store.der_certificate(pki.root_pem) == der
    with pytest.raises(ValueError, match="asn1"):
        ios_store.der_certificate(b"not a certificate")


def test_a_verifier_needs_a_signed_environment_and_production_the_apple_id(pki: ApplePki) -> None:
    roots = [pki.root_path.read_bytes()]
    with pytest.raises(ValueError, match="Production or Sandbox"):
        ios_store.build_verifier(roots, bundle_id="b", app_apple_id=1, environment="Xcode", online_checks=False)
    with pytest.raises(ValueError, match="appAppleId"):
        ios_store.build_verifier(roots, bundle_id="b", app_apple_id=None, environment="Production", online_checks=False)
    sandbox = ios_store.build_verifier(
        roots, bundle_id="b", app_apple_id=None, environment="Sandbox", online_checks=False
    )
    assert isinstance(sandbox, SignedDataVerifier)


def test_the_bundle_id_is_peeked_from_transactions_and_notifications(pki: ApplePki) -> None:
    assert ios_store.peek_bundle_id(pki.transaction(bundleId="com.other")) == "com.other"
    assert ios_store.peek_bundle_id(pki.notification("TEST", bundle_id="com.x")) == "com.x"
    for garbage in ("", "a.b", "a.!!!.c", "a.bnVsbA.c"):
        assert ios_store.peek_bundle_id(garbage) is None


def test_a_first_subscription_period(pki: ApplePki, verifier: SignedDataVerifier) -> None:
    token = "5B2E6E5B-7A3C-4F7E-9D2A-1C1B2A3D4E5F"
    now = now_ms()
    t = txn(pki, verifier, signedDate=now, appAccountToken=token.lower())
    fact = ios_store.transaction_fact(t)
    assert (fact.source, fact.store_key, fact.transaction_id) == ("ios_store", "2000000000000001", "2000000000000001")
    assert (fact.kind, fact.channel, fact.environment, fact.product_id) == (
        "subscription",
        "iap",
        "production",
        "pro_monthly",
    )
    assert fact.stated_at == ios_store.moment(now) and fact.expires_at == ios_store.moment(t.expiresDate)
    assert fact.account_token == token.lower() and fact.in_trial is False and fact.revoked_at is None
    assert fact.active_at(datetime.now(UTC))
    assert fact.active_at(fact.expires_at + timedelta(seconds=1)) is False  # type: ignore[operator]
    assert events(t) == [
        (
            "ios:2000000000000001:subscription_start",
            "subscription_start",
            {
                "product_id": "pro_monthly",
                "store": "app_store",
                "transaction_id": "2000000000000001",
                "original_transaction_id": "2000000000000001",
                "purchase_key": "2000000000000001",
                "storefront": "USA",
                "period_ends_at": iso_z(fact.expires_at),
                "revenue": 9.99,
                "currency": "USD",
            },
        )
    ]


def test_renewals_trials_and_one_time_purchases(pki: ApplePki, verifier: SignedDataVerifier) -> None:
    later = txn(pki, verifier, transactionId="2000000000000002", transactionReason="RENEWAL")
    assert [(i, k) for i, k, _ in events(later)] == [("ios:2000000000000002:renewal", "renewal")]
    trial = txn(pki, verifier, offerType=1, offerDiscountType="FREE_TRIAL", price=0, offerPeriod="P1W")
    assert ios_store.transaction_fact(trial).in_trial is True
    assert events(trial)[0][:2] == ("ios:2000000000000001:trial_start", "trial_start")
    assert "revenue" not in events(trial)[0][2]
    old_style_trial = txn(pki, verifier, offerType=1, price=0)  # before offerDiscountType existed
    assert ios_store.transaction_fact(old_style_trial).in_trial is True
    intro_paid = txn(pki, verifier, offerType=1, offerDiscountType="PAY_AS_YOU_GO", price=990)
    assert ios_store.transaction_fact(intro_paid).in_trial is False
    assert events(intro_paid)[0][1] == "subscription_start"

    lifetime = txn(pki, verifier, type="Non-Consumable", expiresDate=None, productId="pro_lifetime", price=49990)
    fact = ios_store.transaction_fact(lifetime)
    assert fact.kind == "lifetime" and fact.expires_at is None
    assert fact.active_at(datetime.now(UTC) + timedelta(days=3650))
    assert events(lifetime)[0][1:] == (
        "purchase",
        events(lifetime)[0][2] | {"revenue": 49.99, "currency": "USD"},
    )
    coins = txn(pki, verifier, type="Consumable", expiresDate=None, productId="coins_100")
    assert ios_store.transaction_fact(coins).kind == "consumable"
    assert ios_store.transaction_fact(coins).active_at(datetime.now(UTC)) is False
    season = txn(pki, verifier, type="Non-Renewing Subscription", productId="season_pass")
    assert ios_store.transaction_fact(season).kind == "subscription"
    assert events(season)[0][1] == "purchase"
    with pytest.raises(ios_store.Unmappable, match="expiresDate"):
        ios_store.transaction_fact(txn(pki, verifier, type="Non-Renewing Subscription", expiresDate=None))
    with pytest.raises(ios_store.Unmappable, match="product type"):
        ios_store.transaction_fact(txn(pki, verifier, type="Something New"))


def test_a_refund_revokes_and_books_negative_revenue(pki: ApplePki, verifier: SignedDataVerifier) -> None:
    refunded_at = now_ms() - 3600_000
    t = txn(pki, verifier, revocationDate=refunded_at, revocationReason=1, revocationType="REFUND_FULL")
    fact = ios_store.transaction_fact(t)
    assert fact.revoked_at == ios_store.moment(refunded_at) and fact.revocation_reason == "REFUND_FULL"
    assert fact.active_at(datetime.now(UTC)) is False
    found = events(t)
    assert [(i, k) for i, k, _ in found] == [
        ("ios:2000000000000001:subscription_start", "subscription_start"),
        ("ios:2000000000000001:refund", "refund"),
    ]
    assert found[1][2]["revenue"] == -9.99 and found[1][2]["currency"] == "USD"
    prorated = txn(
        pki, verifier, revocationDate=refunded_at, revocationType="REFUND_PRORATED", revocationPercentage=50000
    )
    assert events(prorated)[1][2]["revenue"] == -4.995
    no_type = txn(pki, verifier, revocationDate=refunded_at, revocationReason=0)
    assert ios_store.transaction_fact(no_type).revocation_reason == "REFUNDED_FOR_OTHER_REASON"


def test_sandbox_and_family_shared_transactions_book_no_revenue(pki: ApplePki, tmp_path: Path) -> None:
    sandbox_verifier = ios_store.build_verifier(
        [pki.root_path.read_bytes()], bundle_id=BUNDLE_ID, app_apple_id=None, environment="Sandbox", online_checks=False
    )
    sandbox = sandbox_verifier.verify_and_decode_signed_transaction(pki.transaction(environment="Sandbox"))
    assert ios_store.transaction_fact(sandbox).environment == "sandbox"
    assert events(sandbox) == []
    shared = sandbox_verifier.verify_and_decode_signed_transaction(
        pki.transaction(environment="Sandbox", inAppOwnershipType="FAMILY_SHARED")
    )
    assert events(shared) == []


def test_the_grace_period_keeps_access_until_its_end(pki: ApplePki, verifier: SignedDataVerifier) -> None:
    now = now_ms()
    t = txn(pki, verifier, expiresDate=now - DAY_MS)
    grace_end = now + 3 * DAY_MS
    fact = ios_store.transaction_fact(
        t, info(pki, verifier, gracePeriodExpiresDate=grace_end, isInBillingRetryPeriod=True)
    )
    assert fact.grace_ends_at == ios_store.moment(grace_end) and fact.auto_renew is True
    assert fact.active_at(datetime.now(UTC))
    assert fact.active_at(ios_store.moment(grace_end + 1)) is False  # type: ignore[arg-type]
    assert ios_store.transaction_fact(t).active_at(datetime.now(UTC)) is False
    with pytest.raises(ios_store.Unmappable, match="another purchase"):
        ios_store.transaction_fact(t, info(pki, verifier, originalTransactionId="999"))


def test_notifications(pki: ApplePki, verifier: SignedDataVerifier) -> None:
    def effects(kind: str, subtype: str | None = None, *, with_txn: bool = True, auto_renew: int = 1) -> Any:
        n = verifier.verify_and_decode_notification(
            pki.notification(kind, subtype, txn=transaction() if with_txn else None, renewal_info=renewal())
        )
        t = verifier.verify_and_decode_signed_transaction(n.data.signedTransactionInfo) if with_txn else None
        r = info(pki, verifier, autoRenewStatus=auto_renew)
        return ios_store.notification_effects(n, t, r, app_id="app_1", workspace_id="ws_1", received_at=RECEIVED)

    for kind in ("TEST", "CONSUMPTION_REQUEST"):
        assert not effects(kind).effects
    assert not effects("RENEWAL_EXTENSION", "SUMMARY", with_txn=False).effects
    subscribed = effects("SUBSCRIBED", "INITIAL_BUY")
    assert subscribed.note == "SUBSCRIBED/INITIAL_BUY" and len(subscribed.effects) == 1
    effect = subscribed.effects[0]
    assert effect.app_id == "app_1" and effect.fact.store_key == "2000000000000001"
    assert [e.event_type for e in effect.events("u1")] == ["subscription_start"]
    assert effect.events("u1")[0].user_id == "u1" and effect.events(None)[0].user_id is None

    off = effects("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED", auto_renew=0).effects[0]
    assert off.fact.auto_renew is False
    assert [e.event_id for e in off.events("u1")] == [
        "ios:2000000000000001:subscription_start",
        "ios:2000000000000001:cancellation",
    ]
    on = effects("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_ENABLED").effects[0]
    assert on.fact.auto_renew is True and [e.event_type for e in on.events("u1")] == ["subscription_start"]


def test_event_ids_stay_within_the_lake_limit() -> None:
    assert ios_store.event_id("2000000000000001", "renewal") == "ios:2000000000000001:renewal"
    long_id = ios_store.event_id("9" * 200, "subscription_start")
    assert len(long_id) <= 80 and long_id.startswith("ios:") and long_id.endswith(":subscription_start")
    assert long_id == ios_store.event_id("9" * 200, "subscription_start")


def test_an_upgrade_is_a_new_transaction_of_the_same_purchase(pki: ApplePki, verifier: SignedDataVerifier) -> None:
    """A new transaction on the same originalTransactionId (an upgrade to the yearly plan, in
    JPY): the same `purchase_key` as the first, its own period end, and its price in the fact."""
    now = now_ms()
    upgrade = txn(
        pki, verifier, transactionId="2000000000000007", productId="pro_yearly", transactionReason="PURCHASE",
        price=12_000_000, currency="JPY", purchaseDate=now, expiresDate=now + 365 * DAY_MS,
    )  # fmt: skip
    fact = ios_store.transaction_fact(upgrade)
    assert (fact.store_key, fact.transaction_id, fact.product_id) == (
        "2000000000000001",
        "2000000000000007",
        "pro_yearly",
    )
    assert (fact.price_amount, fact.price_currency, fact.priced_at) == (12000.0, "JPY", ios_store.moment(now))
    assert fact.billing_period is None  # an App Store transaction states no period length
    [(event_id, kind, props)] = events(upgrade)
    assert (event_id, kind) == ("ios:2000000000000007:renewal", "renewal")
    assert props["purchase_key"] == "2000000000000001" and props["transaction_id"] == "2000000000000007"
    assert props["period_ends_at"] == iso_z(ios_store.moment(now + 365 * DAY_MS))
    assert (props["revenue"], props["currency"]) == (12000.0, "JPY") and "billing_period" not in props


def test_a_trial_has_no_price_and_a_refund_names_its_transaction(pki: ApplePki, verifier: SignedDataVerifier) -> None:
    trial = txn(pki, verifier, offerType=1, offerDiscountType="FREE_TRIAL", price=0, offerPeriod="P1W")
    fact = ios_store.transaction_fact(trial)
    assert (fact.in_trial, fact.price_amount, fact.price_currency, fact.priced_at) == (True, None, None, None)
    [(_, kind, props)] = events(trial)
    assert kind == "trial_start" and props["purchase_key"] == "2000000000000001" and "period_ends_at" in props
    now = now_ms()
    refunded = txn(pki, verifier, transactionId="2000000000000002", revocationDate=now, revocationReason=0)
    [_, (_, refund, props)] = events(refunded)
    assert refund == "refund"
    assert (props["purchase_key"], props["transaction_id"], props["revenue"]) == (
        "2000000000000001",
        "2000000000000002",
        -9.99,
    )
    lifetime = txn(pki, verifier, type="Non-Consumable", productId="forever", expiresDate=None)
    [(_, kind, props)] = events(lifetime)
    assert kind == "purchase" and props["purchase_key"] == "2000000000000001" and "period_ends_at" not in props
    assert ios_store.transaction_fact(lifetime).price_amount == 9.99
