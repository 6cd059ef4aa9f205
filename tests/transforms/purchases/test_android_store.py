"""Google Play's purchase resources as ledger facts and canonical events (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.providers.google_play_fake import product, subscription, voided
from transforms.purchases import android_store as gp
from transforms.timefmt import iso_z

AT = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)
ORDER = "GPA.3301-0000-1111-22222"


def fact(state: str, expires: datetime, **kwargs: object) -> gp.StoreFact:
    purchase = subscription(state, expires=expires, **kwargs)  # type: ignore[arg-type]
    return gp.subscription_fact(purchase, store_key="tok-1", token="tok-1", stated_at=AT)


def test_active_grants_until_expiry_with_the_purchase_identities() -> None:
    f = fact("SUBSCRIPTION_STATE_ACTIVE", AT + 10 * DAY, account_id="user-1")
    assert (f.source, f.store_key, f.product_id, f.kind, f.channel) == (
        "android_store", "tok-1", "pro_monthly", "subscription", "iap",
    )  # fmt: skip
    assert f.expires_at == AT + 10 * DAY and f.grace_ends_at is None
    assert f.auto_renew is True and f.account_token == "user-1" and f.transaction_id == ORDER
    assert f.environment == "production"
    assert f.active_at(AT + 9 * DAY) and not f.active_at(AT + 10 * DAY)


def test_grace_period_keeps_access_until_the_extended_expiry() -> None:
    f = fact("SUBSCRIPTION_STATE_IN_GRACE_PERIOD", AT + 3 * DAY)
    assert f.grace_ends_at == AT + 3 * DAY
    assert f.active_at(AT + 2 * DAY) and not f.active_at(AT + 3 * DAY)


@pytest.mark.parametrize(
    "state", ["SUBSCRIPTION_STATE_ON_HOLD", "SUBSCRIPTION_STATE_PAUSED", "SUBSCRIPTION_STATE_PENDING",
              "SUBSCRIPTION_STATE_EXPIRED"],
)  # fmt: skip
def test_states_without_access_grant_nothing_even_with_an_expiry_ahead(state: str) -> None:
    f = fact(state, AT + 5 * DAY)
    assert f.expires_at == AT
    assert not f.active_at(AT)


def test_an_expiry_already_past_is_kept() -> None:
    assert fact("SUBSCRIPTION_STATE_EXPIRED", AT - 2 * DAY).expires_at == AT - 2 * DAY


def test_canceled_keeps_access_until_expiry_without_renewal() -> None:
    f = fact("SUBSCRIPTION_STATE_CANCELED", AT + 4 * DAY, canceled={"userInitiatedCancellation": {}})
    assert f.auto_renew is False and f.active_at(AT + 3 * DAY) and not f.active_at(AT + 4 * DAY)


def test_trial_test_purchase_and_line_item_choice() -> None:
    trial = fact("SUBSCRIPTION_STATE_ACTIVE", AT + 7 * DAY, free_trial=True, test=True)
    assert trial.in_trial and trial.environment == "sandbox"
    two = subscription("SUBSCRIPTION_STATE_ACTIVE", expires=AT + DAY)
    later = dict(two["lineItems"][0], productId="addon", expiryTime="2026-12-30T00:00:00.123456789Z")
    two["lineItems"].append(later)
    f = gp.subscription_fact(two, store_key="tok-1", token="tok-1", stated_at=AT)
    assert f.product_id == "addon" and f.expires_at == datetime(2026, 12, 30, 0, 0, 0, 123456, tzinfo=UTC)


def test_a_resource_without_line_items_or_expiry_is_refused() -> None:
    with pytest.raises(gp.UnexpectedPayload):
        gp.subscription_fact({"subscriptionState": "SUBSCRIPTION_STATE_ACTIVE"}, store_key="t", token="t", stated_at=AT)
    broken = subscription("SUBSCRIPTION_STATE_ACTIVE", expires=AT)
    del broken["lineItems"][0]["expiryTime"]
    with pytest.raises(gp.UnexpectedPayload):
        gp.subscription_fact(broken, store_key="t", token="t", stated_at=AT)


def test_replaced_and_acknowledgement() -> None:
    assert gp.replaced(subscription("SUBSCRIPTION_STATE_EXPIRED", expires=AT, canceled={"replacementCancellation": {}}))
    assert not gp.replaced(subscription("SUBSCRIPTION_STATE_EXPIRED", expires=AT))
    assert gp.subscription_pending_acknowledgement(subscription("SUBSCRIPTION_STATE_ACTIVE", expires=AT))
    assert not gp.subscription_pending_acknowledgement(
        subscription("SUBSCRIPTION_STATE_ACTIVE", expires=AT, acknowledged=True)
    )
    assert not gp.subscription_pending_acknowledgement(subscription("SUBSCRIPTION_STATE_PENDING", expires=AT))


def events(purchase: dict, user: str | None = "user-1") -> dict[str, gp.CanonicalEvent]:  # type: ignore[type-arg]
    f = gp.subscription_fact(purchase, store_key="tok-1", token="tok-1", stated_at=AT)
    found = gp.subscription_events(purchase, f, workspace_id="ws_1", user_id=user, received_at=AT)
    return {e.event_id: e for e in found}


def test_first_order_is_a_start_with_the_base_price_as_revenue() -> None:
    found = events(subscription("SUBSCRIPTION_STATE_ACTIVE", expires=AT + 30 * DAY, started=AT - DAY))
    start = found[f"gp:{ORDER}:subscription_start"]
    assert (start.event_type, start.source, start.platform, start.user_id) == (
        "subscription_start", "android_store", "android", "user-1",
    )  # fmt: skip
    assert start.occurred_at == AT - DAY
    assert (start.properties["revenue"], start.properties["currency"]) == (9.99, "EUR")
    assert start.properties["original_transaction_id"] == "tok-1"
    assert len(found) == 1


def test_a_trial_start_has_no_revenue_and_a_renewal_order_is_a_renewal() -> None:
    trial = events(subscription("SUBSCRIPTION_STATE_ACTIVE", expires=AT + 7 * DAY, free_trial=True))
    assert trial[f"gp:{ORDER}:trial_start"].properties["revenue"] is None
    renewal = events(subscription("SUBSCRIPTION_STATE_ACTIVE", expires=AT + 30 * DAY, order=ORDER + "..3"))
    assert list(renewal) == [f"gp:{ORDER}..3:renewal"]
    assert renewal[f"gp:{ORDER}..3:renewal"].occurred_at == AT


def test_no_price_no_revenue() -> None:
    found = events(subscription("SUBSCRIPTION_STATE_ACTIVE", expires=AT + 30 * DAY, price=None))
    assert found[f"gp:{ORDER}:subscription_start"].properties["revenue"] is None


def test_a_cancellation_lands_at_the_users_cancel_time() -> None:
    found = events(subscription(
        "SUBSCRIPTION_STATE_CANCELED", expires=AT + 5 * DAY, auto_renew=False,
        canceled={"userInitiatedCancellation": {"cancelTime": "2026-11-23T08:00:00Z"}},
    ))  # fmt: skip
    cancel = found[f"gp:{ORDER}:cancellation"]
    assert cancel.occurred_at == datetime(2026, 11, 23, 8, tzinfo=UTC)
    assert cancel.properties["cancel_reason"] == "userInitiatedCancellation"


def test_test_purchases_replaced_and_lapsed_states_land_no_events() -> None:
    assert events(subscription("SUBSCRIPTION_STATE_ACTIVE", expires=AT + DAY, test=True)) == {}
    assert events(subscription("SUBSCRIPTION_STATE_EXPIRED", expires=AT - DAY)) == {}
    assert events(subscription("SUBSCRIPTION_STATE_ON_HOLD", expires=AT + DAY)) == {}


def test_long_order_ids_are_hashed_to_fit() -> None:
    long_id = "GPA." + "9" * 100
    assert len(gp.event_id(long_id, "renewal")) <= 80
    assert gp.event_id(long_id, "renewal") == gp.event_id(long_id, "renewal")
    assert gp.event_id(ORDER, "refund") == f"gp:{ORDER}:refund"


def test_one_time_products() -> None:
    bought = product(purchased=AT - DAY, account_id="user-1")
    f = gp.product_fact(bought, purchase_token="tok-p", product_id="lifetime_unlock", stated_at=AT)
    assert (f.kind, f.expires_at, f.store_key, f.account_token) == ("lifetime", None, "tok-p", "user-1")
    assert f.active_at(AT + 1000 * DAY)
    assert gp.product_pending_acknowledgement(bought)
    (event,) = gp.product_events(bought, f, workspace_id="ws_1", user_id="user-1", received_at=AT)
    assert (event.event_id, event.occurred_at) == ("gp:GPA.3301-9999-8888-77777:purchase", AT - DAY)
    assert event.properties["revenue"] is None

    consumed = gp.product_fact(product(consumed=True), purchase_token="t", product_id="coins", stated_at=AT)
    assert consumed.kind == "consumable" and not consumed.active_at(AT)
    canceled = gp.product_fact(product(state=1), purchase_token="t", product_id="x", stated_at=AT)
    assert canceled.revoked_at == AT and not canceled.active_at(AT)
    pending = product(state=2)
    assert not gp.product_fact(pending, purchase_token="t", product_id="x", stated_at=AT).active_at(AT)
    assert not gp.product_pending_acknowledgement(pending)
    test = product()
    test["purchaseType"] = 0
    assert gp.product_fact(test, purchase_token="t", product_id="x", stated_at=AT).environment == "sandbox"


def test_voiding_revokes_what_the_ledger_held() -> None:
    held = fact("SUBSCRIPTION_STATE_ACTIVE", AT + 20 * DAY)
    voided = gp.voided_fact(held, store_key="tok-1", product_type=1, voided_at=AT + DAY, refund_type=1)
    assert voided.product_id == "pro_monthly" and voided.expires_at == held.expires_at
    assert voided.revoked_at == AT + DAY and voided.revocation_reason == "voided:1"
    assert voided.stated_at == AT + DAY and voided.auto_renew is False
    assert voided.active_at(AT + DAY - timedelta(seconds=1)) and not voided.active_at(AT + DAY)
    # A void older than the last statement still applies (stated no earlier than it).
    late = gp.voided_fact(held, store_key="tok-1", product_type=1, voided_at=AT - DAY, refund_type=None)
    assert late.stated_at == AT and not late.active_at(AT)
    (refund,) = gp.refund_events(voided, ORDER, workspace_id="ws_1", user_id="user-1", received_at=AT + DAY)
    assert (refund.event_id, refund.occurred_at) == (f"gp:{ORDER}:refund", AT + DAY)


def test_voiding_a_purchase_never_seen_records_it_revoked() -> None:
    sub = gp.voided_fact(None, store_key="tok-x", product_type=1, voided_at=AT, refund_type=None)
    assert (sub.kind, sub.expires_at, sub.revoked_at) == ("subscription", AT, AT)
    one = gp.voided_fact(None, store_key="tok-y", product_type=2, voided_at=AT, refund_type=None)
    assert one.kind == "lifetime" and not one.active_at(AT)


def test_timestamps() -> None:
    assert gp.parse_time("2026-11-24T12:00:00Z") == AT
    assert gp.parse_time("2026-11-24T12:00:00.5Z") == AT + timedelta(milliseconds=500)
    assert gp.parse_time("nonsense") is None and gp.parse_time(None) is None
    assert gp.parse_millis("1795521600000") == datetime(2026, 11, 24, 12, tzinfo=UTC)
    assert gp.parse_millis("x") is None


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("public, max-age=19780, must-revalidate, no-transform", 19780),  # Google's certificates
        ("max-age=0", 0),
        ('private, MAX-AGE="60"', 60),
        ("public, s-maxage=600", None),
        ("no-store, max-age=600", None),
        ("no-cache", None),
        ("", None),
        (None, None),
    ],
)
def test_max_age_of_cache_control(value: str | None, seconds: int | None) -> None:
    assert gp.max_age(value) == seconds


def test_only_a_jws_shaped_rs256_token_with_a_kid_has_a_header() -> None:
    assert gp.id_token_header("eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.e30.c2ln") == {"alg": "RS256", "kid": "k1"}
    for shaped_wrong in ("", "abc", "a.b", "a.b.c.d", "eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.e30.c2ln" + "A" * 9000,
                         "eyJhbGciOiJIUzI1NiIsImtpZCI6ImsxIn0.e30.c2ln",  # HS256
                         "eyJhbGciOiJSUzI1NiJ9.e30.c2ln",  # no kid
                         "W10.e30.c2ln"):  # a JSON array  # fmt: skip
        assert gp.id_token_header(shaped_wrong) is None, shaped_wrong


def test_a_void_is_confirmed_by_its_token_and_order_the_latest_when_several() -> None:
    listed = [
        voided("tok-1", ORDER, voided_at=AT - DAY),
        voided("tok-1", ORDER, voided_at=AT),
        voided("tok-1", ORDER + "..0", voided_at=AT),
        voided("tok-2", "GPA.2", voided_at=AT),
    ]
    found = gp.confirmed_void(listed, token="tok-1", order_id=ORDER)
    assert found is not None and gp.parse_millis(found["voidedTimeMillis"]) == AT
    assert gp.confirmed_void(listed, token="tok-1", order_id=None) is not None
    assert gp.confirmed_void(listed, token="tok-1", order_id="GPA.other") is None
    assert gp.confirmed_void(listed, token="tok-3", order_id=None) is None
    assert gp.refund_type_of(listed[0]) == gp.FULL_REFUND
    assert gp.refund_type_of(listed[0] | {"voidedQuantity": 1}) == gp.QUANTITY_BASED_PARTIAL_REFUND


def test_a_linked_token_lands_under_its_chains_root_with_the_new_price() -> None:
    """An upgrade issues a new token linking to the first: resolved to the root, its events carry
    the root as `purchase_key` (the ledger's store_key) and its order as `transaction_id`, and
    its fact the new plan's price (JPY: Google's Money in units and nanos)."""
    upgraded = subscription(
        "SUBSCRIPTION_STATE_ACTIVE", expires=AT + 365 * DAY, product="pro_yearly", order="GPA.3301-5555-6666-77777",
        started=AT, linked="tok-1", price=("12000", 0, "JPY"),
    )  # fmt: skip
    key = gp.resolve_store_key("tok-2", upgraded, held=lambda token: None, linked_of=lambda token: None)
    assert key == "tok-1"
    f = gp.subscription_fact(upgraded, store_key=key, token="tok-2", stated_at=AT)
    assert (f.store_key, f.current_token, f.transaction_id) == ("tok-1", "tok-2", "GPA.3301-5555-6666-77777")
    assert (f.price_amount, f.price_currency, f.priced_at, f.billing_period) == (12000.0, "JPY", AT, None)
    (start,) = gp.subscription_events(upgraded, f, workspace_id="ws_1", user_id="user-1", received_at=AT)
    assert start.properties["purchase_key"] == "tok-1"
    assert start.properties["transaction_id"] == "GPA.3301-5555-6666-77777"
    assert start.properties["period_ends_at"] == iso_z(AT + 365 * DAY)
    assert (start.properties["revenue"], start.properties["currency"]) == (12000.0, "JPY")
    assert "billing_period" not in start.properties  # the resource names the base plan, not its period


def test_a_trial_states_no_price_and_a_renewal_its_base_price_at_the_renewal() -> None:
    trial = fact("SUBSCRIPTION_STATE_ACTIVE", AT + 7 * DAY, free_trial=True)
    assert (trial.in_trial, trial.price_amount, trial.price_currency, trial.priced_at) == (True, None, None, None)
    found = events(subscription("SUBSCRIPTION_STATE_ACTIVE", expires=AT + 7 * DAY, free_trial=True))
    assert found[f"gp:{ORDER}:trial_start"].properties["period_ends_at"] == iso_z(AT + 7 * DAY)
    renewed = fact("SUBSCRIPTION_STATE_ACTIVE", AT + 30 * DAY, order=ORDER + "..1")
    assert (renewed.price_amount, renewed.price_currency, renewed.priced_at) == (9.99, "EUR", AT)
    lapsed = fact("SUBSCRIPTION_STATE_ON_HOLD", AT + DAY)
    assert lapsed.price_amount is None  # no access, no paid period: the ledger keeps its price


def test_a_refund_names_the_voided_order_and_the_purchase() -> None:
    held = fact("SUBSCRIPTION_STATE_ACTIVE", AT + 20 * DAY)
    voided_fact = gp.voided_fact(held, store_key="tok-1", product_type=1, voided_at=AT + DAY, refund_type=1)
    (refund,) = gp.refund_events(voided_fact, ORDER + "..2", workspace_id="ws_1", user_id="u", received_at=AT + DAY)
    assert refund.event_type == "refund"
    assert (refund.properties["purchase_key"], refund.properties["transaction_id"]) == ("tok-1", ORDER + "..2")
    user_cancelled = {"userInitiatedCancellation": {}}
    cancelled = events(
        subscription("SUBSCRIPTION_STATE_CANCELED", expires=AT + 5 * DAY, auto_renew=False, canceled=user_cancelled)
    )
    assert cancelled[f"gp:{ORDER}:cancellation"].properties["purchase_key"] == "tok-1"
    bought = product(purchased=AT - DAY)
    one = gp.product_fact(bought, purchase_token="tok-p", product_id="lifetime_unlock", stated_at=AT)
    (purchase,) = gp.product_events(bought, one, workspace_id="ws_1", user_id="u", received_at=AT)
    assert purchase.properties["purchase_key"] == "tok-p" and one.price_amount is None  # no price in the resource
