"""What a store or a payment provider states about one purchase, once verified: a `StoreFact`.

Every source speaks its own shape (an App Store JWS transaction, a Google Play
`SubscriptionPurchaseV2`, a Stripe subscription, a RevenueCat or Adapty event); each has a pure
mapper in `transforms.purchases` that turns a verified payload into facts, and the ledger
(`warehouse.entitlements`) applies facts, whoever sent them. A fact says nothing about whether
the user is entitled *now*: `active` is computed when read (`access_ends_at` against the clock),
so a monthly subscription that lapses stops granting access without any notification.

A purchase is named by `(source, store_key)`, the identifier that stays the same across its
renewals: Apple's `originalTransactionId`, the first purchase token of a Google Play
subscription (its `linkedPurchaseToken` chain's root), Stripe's subscription id, a provider's
original transaction id. Later notifications find the purchase, and so its user, by that key.
Where the store answers for the purchase under another identifier than its key, the newest one
it issued travels as `current_token` (Google Play: the chain's latest purchase token, since
`subscriptionsv2.get` on an earlier one answers only that it was replaced).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal

# Where a fact comes from: the seven provider paths' kinds (the generic attribution path states
# no purchases).
IOS_STORE = "ios_store"
ANDROID_STORE = "android_store"
PAYMENT_PROCESSOR = "payment_processor"
SUBSCRIPTION_PROVIDER_A = "subscription_provider_a"
SUBSCRIPTION_PROVIDER_B = "subscription_provider_b"
GENERIC_SUBSCRIPTION = "generic-subscription"
SOURCES = (
    IOS_STORE,
    ANDROID_STORE,
    PAYMENT_PROCESSOR,
    SUBSCRIPTION_PROVIDER_A,
    SUBSCRIPTION_PROVIDER_B,
    GENERIC_SUBSCRIPTION,
)
# Access FloKit itself grants (support's promotional grants, `POST /v1/customers/{user_id}/
# entitlements`): a grant's source but never a fact's, since no store or provider states it.
PROMOTIONAL = "promotional"
GRANT_SOURCES = (*SOURCES, PROMOTIONAL)

# What the purchase is: a subscription grants until it expires (plus any grace period); a
# lifetime (non-consumable) purchase never expires; a consumable is recorded (so a later refund
# finds its user) but grants no lasting access.
Kind = Literal["subscription", "lifetime", "consumable"]
KINDS: tuple[Kind, ...] = ("subscription", "lifetime", "consumable")

# How it was paid, the entitlement answer's `source`: `iap` in a store (directly or through a
# subscription provider), `web` through a payment processor, `promotional` granted by a provider
# without a payment.
Channel = Literal["iap", "web", "promotional"]
CHANNELS: tuple[Channel, ...] = ("iap", "web", "promotional")

Environment = Literal["production", "sandbox"]

# How far after this server's clock a statement may be dated. The newest statement wins, so one
# dated in the future (a forged or broken payload's event time: 2100) would outrank every
# genuine one until then; a statement's time is therefore believed only up to this bound, which
# leaves room for a source's clock running a little ahead of ours.
MAX_STATEMENT_LEAD = timedelta(minutes=5)


@dataclass(frozen=True)
class StoreFact:
    """The state of one purchase as its source stated it at `stated_at`.

    `stated_at` orders facts about the same purchase: the ledger keeps the latest statement, so
    a notification delivered late (stores retry for days) never undoes a newer one.

    `user_hint` is a user id the source itself names from data it signs or that came with
    verified credentials (Stripe metadata, RevenueCat's `app_user_id`); None for the stores,
    whose payloads carry at most `account_token`. `transfer` says the source reports that the
    purchase moved to `user_hint` (RevenueCat's TRANSFER): only then may a purchase linked to
    one user be linked to another.

    `current_token` is the identifier the store answers for the purchase under now, when that is
    not `store_key`: Google Play's newest purchase token of the subscription (an upgrade,
    downgrade or re-signup issues a new token linking back to the previous one, and Google then
    reads the previous one as "replaced" only). A store reader sets it to the token it read
    when that token was the newest (not replaced); the ledger keeps it under the same
    newest-statement-wins rule as the state, so a sync re-reads the purchase by it. None: the
    source reads a purchase by its key, or this statement names no token (the ledger's stays).

    `price_amount` / `price_currency` / `priced_at` / `billing_period`: the price of the latest
    PAID transaction the statement names (major units, ISO 4217, the transaction's time, which
    picks the day's exchange rate), and its billing period as an ISO 8601 duration where the
    source states one: what MRR and revenue read from the ledger (issue 34). A trial period
    has no price; a statement that names none (a trial, a cancellation, a source whose payload
    carries no price) leaves the ledger's previous price as it was, as `current_token` does.
    """

    source: str
    store_key: str
    product_id: str | None
    kind: Kind
    channel: Channel
    environment: Environment
    stated_at: datetime
    expires_at: datetime | None = None  # None: never (lifetime); ignored for consumables
    grace_ends_at: datetime | None = None  # billing retry with access kept until then
    revoked_at: datetime | None = None  # refunded or revoked: no access from then on
    revocation_reason: str | None = None
    in_trial: bool = False
    auto_renew: bool | None = None
    account_token: str | None = None  # Apple appAccountToken / Google obfuscatedExternalAccountId
    transaction_id: str | None = None  # the latest transaction (period) the fact is about
    user_hint: str | None = None
    transfer: bool = False
    current_token: str | None = None
    # The source's own id of the paying customer, where it has one apart from the app's user id
    # (Stripe's customer id, RevenueCat's original app user id, Adapty's profile id): what support
    # searches by (`GET /v1/customers?query=`). The ledger keeps the latest one it was told.
    customer_id: str | None = None
    price_amount: float | None = None
    price_currency: str | None = None
    priced_at: datetime | None = None
    billing_period: str | None = None

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"unknown source {self.source!r}")
        if not self.store_key:
            raise ValueError("a fact needs the purchase's store key")
        if (self.price_amount is None) != (self.price_currency is None):
            raise ValueError("a price needs its amount and its currency")
        if self.price_amount is not None and self.price_amount < 0:
            raise ValueError("a price is never negative")
        for name in ("stated_at", "expires_at", "grace_ends_at", "revoked_at", "priced_at"):
            value = getattr(self, name)
            if value is not None and value.tzinfo is None:
                raise ValueError(f"{name} must be timezone-aware")
        if self.kind == "subscription" and self.expires_at is None:
            raise ValueError("a subscription fact needs expires_at")

    @property
    def access_ends_at(self) -> datetime | None:
        """Until when the purchase grants access, revocation aside: the later of the expiry and
        the grace period's end; None for a lifetime purchase (never ends)."""
        if self.kind == "lifetime":
            return None
        if self.kind == "consumable":
            return self.stated_at  # records a purchase, grants nothing lasting
        assert self.expires_at is not None
        if self.grace_ends_at is not None and self.grace_ends_at > self.expires_at:
            return self.grace_ends_at
        return self.expires_at

    def active_at(self, now: datetime) -> bool:
        """The verdict this fact alone gives at `now` (what a receipt answer says)."""
        if self.kind == "consumable":
            return False
        if self.revoked_at is not None and self.revoked_at <= now:
            return False
        ends = self.access_ends_at
        return ends is None or now < ends


def bounded(fact: StoreFact, now: datetime) -> StoreFact:
    """`fact` as the ledger orders it: stated no later than `MAX_STATEMENT_LEAD` after `now` (the
    server's clock), whichever source stated it. Only the ordering time is bounded; what the fact
    states (an expiry, a revocation time) is its own."""
    latest = now + MAX_STATEMENT_LEAD
    return fact if fact.stated_at <= latest else replace(fact, stated_at=latest)
