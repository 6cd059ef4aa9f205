"""The Stripe sync: against localstripe (Stripe's API shapes, served in-process on 127.0.0.1)
for the real listing and paging path, and against a small fake on 127.0.0.1 speaking Stripe's
list and error shapes for what localstripe cannot do (429 with and without `Retry-After`, 401,
5xx, live-mode events by the hundred)."""

from __future__ import annotations

import email.utils
import json
import re
import time
from typing import Any

import pytest
import stripe
from flask.testing import FlaskClient

from clients.payment_processor import StripeSync, retry_after
from orchestration.syncs.connectors import connector_for
from orchestration.syncs.connectors.payment_processor import CONNECTOR
from orchestration.syncs.execute import SyncOutcome, execute_sync
from tests.providers.stripe_fake import (
    KEY,
    WEBHOOK_SECRET,
    StripeFake,
    error,
    event,
    invoice_payment,
    one_time_invoice,
    post_event,
    refunded_charge,
    stripe_fake,
    subscription,
    subscription_invoice,
)
from tests.support.provider_notifications import KEY as NOTIFICATIONS_KEY
from tests.support.provider_notifications import connect, landed, localstripe, settings
from transforms.client_errors import ClientError
from transforms.integrations.kinds import ValidConfig, validate_config
from warehouse.db import Database
from warehouse.entitlements import ledger
from warehouse.integrations import repository as repo
from warehouse.integrations.target import SyncTarget
from warehouse.lake import LocalLake

__all__ = ["settings", "stripe_fake"]

TYPE = "payment_processor"


def _config(workspace: dict[str, Any], base_url: str, key: str = KEY) -> ValidConfig:
    raw = {"secret_key": key, "webhook_secret": WEBHOOK_SECRET, "app_id": workspace["app_id"], "base_url": base_url}
    return validate_config(TYPE, raw)


def _target(db: Database, workspace: dict[str, Any], tmp_path: Any, state: dict[str, Any] | None = None) -> SyncTarget:
    return SyncTarget(db, LocalLake(tmp_path / "lake"), workspace["workspace_id"], "int_test", TYPE, state=state or {})


def _sync(
    config: ValidConfig, target: SyncTarget, *, sleep: Any = time.sleep, **tuning: Any
) -> tuple[StripeSync, list[str]]:
    lines: list[str] = []
    sc = CONNECTOR.client(config)
    sc.sleep = sleep
    for name, value in tuning.items():
        setattr(sc, name, value)
    CONNECTOR.sync(sc, target, config, lines.append)
    return sc, lines


def _active(db: Database, workspace: dict[str, Any], user: str) -> bool:
    with db.read() as conn:
        return ledger.current(
            conn, workspace_id=workspace["workspace_id"], app_id=workspace["app_id"], user_id=user
        ).active


def _kinds(db: Database) -> list[tuple[str | None, str, float | None]]:
    return sorted(((e["user_id"], e["event_type"], e["properties"].get("revenue")) for e in landed(db)), key=str)


# --- localstripe ----------------------------------------------------------------------------


@pytest.fixture
def stripe_api(monkeypatch: pytest.MonkeyPatch) -> str:
    """localstripe, with what Stripe documents for `GET /v1/events` and localstripe 1.15 lacks:
    the `types` filter (it knows only `type`), and the order, newest first (it lists them in
    the order they were made; within one second, that order is all that tells them apart)."""
    api = localstripe()
    from localstripe import resources

    original = resources.Event._api_list_all.__func__  # type: ignore[attr-defined]

    def listing(cls: Any, url: str, types: list[str] | None = None, **kwargs: Any) -> Any:
        found = original(cls, url, **kwargs)
        found._list = found._list[::-1]
        if types is not None:
            found._list = [e for e in found._list if e.type in types]
        return found

    monkeypatch.setattr(resources.Event, "_api_list_all", classmethod(listing))
    return api


def _live() -> None:
    """localstripe is always in test mode, and FloKit counts no test-mode revenue: the objects
    are made live-mode objects, as a live account's would be."""
    from localstripe import resources

    for obj in list(resources.store.values()):
        if hasattr(obj, "livemode"):
            obj.livemode = True
        if isinstance(obj, resources.Event):
            obj.data["object"]["livemode"] = True


class Shop:
    """A Stripe account with a monthly plan and a one-time price, as an app's web shop."""

    def __init__(self, api: str) -> None:
        self.v1 = stripe.StripeClient("sk_test_localstripe", base_addresses={"api": api}, max_network_retries=0).v1
        product = self.v1.products.create(params={"name": "Pro", "type": "service"})  # type: ignore[typeddict-unknown-key]
        self.plan = self.v1.plans.create(
            params={"product": product.id, "amount": 999, "currency": "usd", "interval": "month"}
        )

    def customer(self, user: str) -> str:
        customer = self.v1.customers.create(params={"metadata": {"flokit_user_id": user}})
        card = {"number": "4242424242424242", "exp_month": 12, "exp_year": 2030, "cvc": "123"}
        method = self.v1.payment_methods.create(params={"type": "card", "card": card})  # type: ignore[typeddict-item]
        self.v1.payment_methods.attach(method.id, params={"customer": customer.id})
        self.v1.customers.update(customer.id, params={"invoice_settings": {"default_payment_method": method.id}})
        return customer.id

    def subscribe(self, user: str) -> str:
        # The user is named on the Customer only: the sync reads it from the expanded customer.
        items: Any = [{"plan": self.plan.id}]
        return self.v1.subscriptions.create(params={"customer": self.customer(user), "items": items}).id

    def refund_first_payment(self, subscription_id: str) -> None:
        """Refund the subscription's first invoice (localstripe makes no invoice without a
        subscription, so a one-time purchase is the fake's test below)."""
        invoice = self.v1.invoices.retrieve(str(self.v1.subscriptions.retrieve(subscription_id).latest_invoice))
        assert invoice.status == "paid" and isinstance(invoice.payment_intent, str)
        self.v1.refunds.create(params={"payment_intent": invoice.payment_intent})


def test_a_first_sync_of_a_shop_grants_what_stripe_says_and_a_second_changes_nothing(
    db: Database, workspace: dict[str, Any], tmp_path: Any, stripe_api: str
) -> None:
    shop = Shop(stripe_api)
    alice = shop.subscribe("alice")
    shop.v1.subscriptions.cancel(shop.subscribe("bob"))
    shop.refund_first_payment(shop.subscribe("carol"))
    _live()
    config = _config(workspace, stripe_api)
    target = _target(db, workspace, tmp_path)
    _, lines = _sync(config, target)

    # A refunded payment of a subscription does not end it (Stripe cancels it separately).
    assert [_active(db, workspace, u) for u in ("alice", "bob", "carol")] == [True, False, True]
    assert _kinds(db) == [
        ("alice", "renewal", 9.99),  # localstripe sets no billing_reason: not a subscription_create
        ("bob", "renewal", 9.99),
        ("carol", "refund", -9.99),  # the charge's customer (expanded) names her
        ("carol", "renewal", 9.99),
    ]
    assert {e["source"] for e in landed(db)} == {TYPE}
    assert target.records == 4
    first = target.state["stripe"]
    assert first["swept"] is True and first["events_read"] == 4  # three subscriptions created, one deleted
    assert "after a sweep" in lines[-1]

    # Nothing happened at Stripe since: nothing changes, and no sweep.
    again = _target(db, workspace, tmp_path, state=json.loads(json.dumps(target.state)))
    _sync(config, again)
    assert again.records == 0 and again.state["stripe"]["swept"] is False
    assert len(landed(db)) == 4
    assert [_active(db, workspace, u) for u in ("alice", "bob", "carol")] == [True, False, True]

    # Alice cancels: the next sync reads the deletion event from the cursor on.
    time.sleep(1)
    shop.v1.subscriptions.cancel(alice)
    _live()
    later = _target(db, workspace, tmp_path, state=json.loads(json.dumps(again.state)))
    _sync(config, later)
    assert _active(db, workspace, "alice") is False
    assert later.state["stripe"]["cursor"] > first["cursor"]
    assert later.state["stripe"]["swept"] is False and len(landed(db)) == 4
    assert [_active(db, workspace, u) for u in ("bob", "carol")] == [False, True]


def test_the_check_lists_one_event(db: Database, workspace: dict[str, Any], stripe_api: str) -> None:
    Shop(stripe_api)
    summary = CONNECTOR.check(CONNECTOR.client(_config(workspace, stripe_api)))
    assert summary.startswith("Stripe (test mode): the key can list events; the latest is ")


def test_the_connector_is_registered() -> None:
    assert connector_for(TYPE) is CONNECTOR


# --- a fake for what localstripe cannot do ---------------------------------------------------

NOW = int(time.time())


@pytest.fixture(autouse=True)
def _clock() -> None:
    """The fake's objects are dated from the test's own start, not the module's import (a whole
    suite takes half an hour between the two, and the sync compares with the real clock)."""
    global NOW
    NOW = int(time.time())


def _invoice(n: int, *, at: int) -> dict[str, Any]:
    return subscription_invoice(
        f"in_{n:04d}", at=at, billing_reason="subscription_create" if n == 0 else "subscription_cycle"
    )


def _event(n: int, kind: str, obj: dict[str, Any], *, at: int) -> dict[str, Any]:
    return event(kind, obj, event_id=f"evt_{n:04d}", created=at)


@pytest.fixture
def fake(stripe_fake: StripeFake) -> StripeFake:
    return stripe_fake


def test_several_pages_of_events_are_applied_once_each(
    db: Database, workspace: dict[str, Any], tmp_path: Any, fake: StripeFake
) -> None:
    fake.lists["subscriptions"] = [subscription()]
    fake.lists["events"] = [
        _event(n, "invoice.paid", _invoice(n, at=NOW - 3600 + n), at=NOW - 3600 + n) for n in range(250)
    ]
    fake.lists["events"] += [_event(999, "customer.created", {"id": "cus_1", "object": "customer"}, at=NOW - 10)]
    target = _target(db, workspace, tmp_path)
    _sync(_config(workspace, fake.url), target)
    pages = fake.paths("/v1/events")
    assert len(pages) == 3 and all("limit=100" in p for p in pages)
    assert all("starting_after=evt_" in p for p in pages[1:]) and "starting_after" not in pages[0]
    assert all("types%5B" in p or "types[" in p for p in pages)  # only the applied types are asked for
    kinds = _kinds(db)
    assert len(kinds) == 250 and kinds.count(("user-7", "subscription_start", 12.99)) == 1
    assert target.records == 250 and target.state["stripe"]["events_read"] == 250
    assert _active(db, workspace, "user-7")
    # The events Stripe keeps are 30 days: a first sync asks for no older ones.
    since = int(re.search(r"created%5Bgte%5D=(\d+)", pages[0]).group(1))  # type: ignore[union-attr]
    assert abs(since - (NOW - 30 * 86400)) < 120
    # Once more from the cursor: nothing new, and no sweep.
    again = _target(db, workspace, tmp_path, state=json.loads(json.dumps(target.state)))
    before = len(fake.paths("/v1/subscriptions"))
    _sync(_config(workspace, fake.url), again)
    assert again.records == 0 and len(fake.paths("/v1/subscriptions")) == before


def test_a_webhook_event_and_a_sync_of_the_same_invoice_land_once(
    client: FlaskClient, db: Database, workspace: dict[str, Any], tmp_path: Any, fake: StripeFake
) -> None:
    integration = connect(db, workspace["workspace_id"], TYPE, {
        "secret_key": KEY, "webhook_secret": WEBHOOK_SECRET, "app_id": workspace["app_id"], "base_url": fake.url,
    })  # fmt: skip
    invoice = _invoice(0, at=NOW - 60)
    event = _event(1, "invoice.paid", invoice, at=NOW - 60)
    r = post_event(client, integration, event)
    assert r.status_code == 200 and r.json["events_landed"] == 1, r.json
    # The sync reads it twice more: the invoice in the sweep and its event.
    fake.lists["invoices"] = [invoice]
    fake.lists["events"] = [event]
    target = _target(db, workspace, tmp_path)
    _sync(_config(workspace, fake.url), target)
    assert target.state["stripe"]["events_read"] == 1
    assert [e["event_id"] for e in landed(db)] == ["stripe:in_0000:subscription_start"]
    assert target.records == 0


def test_a_subscription_without_a_named_user_is_linked_through_its_customer(
    db: Database, workspace: dict[str, Any], tmp_path: Any, fake: StripeFake
) -> None:
    fake.lists["subscriptions"] = [subscription(user=None)]
    fake.customers["cus_1"] = {"id": "cus_1", "object": "customer", "metadata": {"flokit_user_id": "user-42"}}
    _sync(_config(workspace, fake.url), _target(db, workspace, tmp_path))
    assert _active(db, workspace, "user-42")
    assert fake.paths("/v1/customers/cus_1")


def test_a_429_with_retry_after_waits_what_stripe_says(
    db: Database, workspace: dict[str, Any], tmp_path: Any, fake: StripeFake
) -> None:
    fake.lists["subscriptions"] = [subscription()]
    fake.failures = [error(429, "Too many requests hit the API too quickly.", **{"Retry-After": "1"})]
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        time.sleep(seconds)

    sc, lines = _sync(_config(workspace, fake.url), _target(db, workspace, tmp_path), sleep=sleep, backoff_s=30.0)
    assert waits == [1.0] and sc.rate_limited == 1
    assert fake.seen[1][0] - fake.seen[0][0] >= 1.0  # the retry came after the wait
    assert any("waiting 1.00 s (Retry-After)" in line for line in lines)
    assert _active(db, workspace, "user-7")


def test_a_429_without_retry_after_backs_off_exponentially(
    db: Database, workspace: dict[str, Any], tmp_path: Any, fake: StripeFake
) -> None:
    fake.lists["subscriptions"] = [subscription()]
    fake.failures = [error(429, "Too many requests hit the API too quickly.") for _ in range(3)]
    waits: list[float] = []
    target = _target(db, workspace, tmp_path)
    sc, _ = _sync(_config(workspace, fake.url), target, sleep=waits.append, backoff_s=0.5)
    assert waits == [0.5, 1.0, 2.0] and sc.rate_limited == 3
    assert target.state["stripe"]["rate_limited"] == 3
    assert _active(db, workspace, "user-7")


def test_429s_beyond_the_budget_fail_as_rate_limited_and_apply_nothing(
    db: Database, workspace: dict[str, Any], tmp_path: Any, fake: StripeFake
) -> None:
    fake.lists["subscriptions"] = [subscription()]
    fake.failures = [error(429, "Too many requests hit the API too quickly.") for _ in range(20)]
    waits: list[float] = []
    with pytest.raises(ClientError) as failure:
        _sync(_config(workspace, fake.url), _target(db, workspace, tmp_path), sleep=waits.append, budget_s=3.0)
    assert failure.value.code == "rate_limited" and not failure.value.refused and failure.value.status == 429
    assert "Too many requests" in failure.value.message
    assert sum(waits) <= 3.0 and waits == [1.0, 2.0]
    # A Retry-After longer than one wait may be is not waited out at all.
    fake.failures = [error(429, "Too many requests hit the API too quickly.", **{"Retry-After": "600"})]
    waits.clear()
    with pytest.raises(ClientError) as long_wait:
        _sync(_config(workspace, fake.url), _target(db, workspace, tmp_path), sleep=waits.append)
    assert long_wait.value.code == "rate_limited" and waits == []
    assert not _active(db, workspace, "user-7") and landed(db) == []


def test_a_5xx_then_success(db: Database, workspace: dict[str, Any], tmp_path: Any, fake: StripeFake) -> None:
    fake.lists["subscriptions"] = [subscription()]
    fake.failures = [error(500, "An unknown error occurred", "api_error")]
    waits: list[float] = []
    _sync(_config(workspace, fake.url), _target(db, workspace, tmp_path), sleep=waits.append, backoff_s=0.25)
    assert waits == [0.25] and _active(db, workspace, "user-7")
    fake.failures = [error(503, "Service unavailable", "api_error") for _ in range(5)]
    with pytest.raises(ClientError) as failure:
        _sync(_config(workspace, fake.url), _target(db, workspace, tmp_path), sleep=waits.append, backoff_s=0.01)
    assert failure.value.code == "provider_error" and not failure.value.refused


def test_401_is_an_auth_failure_with_stripes_message_for_the_sync_and_the_check(
    db: Database, workspace: dict[str, Any], tmp_path: Any, fake: StripeFake
) -> None:
    fake.lists["subscriptions"] = [subscription()]
    config = _config(workspace, fake.url, key="sk_live_wrong")
    with pytest.raises(ClientError) as failure:
        _sync(config, _target(db, workspace, tmp_path))
    with pytest.raises(ClientError) as checked:
        CONNECTOR.check(CONNECTOR.client(config))
    for f in (failure.value, checked.value):
        assert f.code == "auth" and f.refused and f.status == 401
        assert "Invalid API Key provided" in f.message
    assert len(fake.seen) == 2  # a refusal is not retried
    assert not _active(db, workspace, "user-7")


def test_an_empty_account_is_a_success_with_nothing(
    db: Database, workspace: dict[str, Any], tmp_path: Any, fake: StripeFake
) -> None:
    target = _target(db, workspace, tmp_path)
    _sync(_config(workspace, fake.url), target)
    summary = CONNECTOR.check(CONNECTOR.client(_config(workspace, fake.url)))
    assert target.records == 0 and landed(db) == [] and target.state["stripe"]["events_read"] == 0
    assert summary == "Stripe: the key can list events; none in the last 30 days"


def test_a_cursor_older_than_the_events_stripe_keeps_sweeps_the_gap(
    db: Database, workspace: dict[str, Any], tmp_path: Any, fake: StripeFake
) -> None:
    old = NOW - 40 * 86400
    fake.lists["invoices"] = [_invoice(n, at=old - 86400 + n * 2 * 86400) for n in range(2)]  # before, in the gap
    target = _target(db, workspace, tmp_path, state={"stripe": {"cursor": old}})
    _sync(_config(workspace, fake.url), target)
    invoices = fake.paths("/v1/invoices")
    assert len(invoices) == 1 and f"created%5Bgt%5D={old}" in invoices[0]
    assert [e["event_id"] for e in landed(db)] == ["stripe:in_0001:renewal"]
    assert target.state["stripe"]["swept"] is True


def test_a_one_time_purchase_is_granted_by_the_sweep_and_revoked_by_its_refund_event(
    db: Database, workspace: dict[str, Any], tmp_path: Any, fake: StripeFake
) -> None:
    paid = NOW - 7200
    # Listed with `expand: ["data.customer"]`: the Customer's metadata names the buyer.
    buyer = {"id": "cus_9", "object": "customer", "metadata": {"flokit_user_id": "user-9"}}
    one_time = one_time_invoice("in_9", at=paid, payment_intent="pi_9", customer=buyer, metadata={})
    fake.lists["invoices"] = [one_time, {**_invoice(5, at=paid), "status": "open", "id": "in_open"}]
    target = _target(db, workspace, tmp_path)
    _sync(_config(workspace, fake.url), target)
    assert _active(db, workspace, "user-9")
    assert _kinds(db) == [("user-9", "purchase", 49.99)]  # the open invoice is no revenue

    charge = refunded_charge("ch_9", payment_intent="pi_9", at=paid)
    fake.lists["events"] = [_event(2, "charge.refunded", charge, at=NOW - 5)]
    again = _target(db, workspace, tmp_path, state=json.loads(json.dumps(target.state)))
    _sync(_config(workspace, fake.url), again)
    assert not _active(db, workspace, "user-9")
    assert _kinds(db) == [("user-9", "purchase", 49.99), ("user-9", "refund", -49.99)]


def test_a_queued_sync_runs_to_its_end_keeps_its_cursor_and_a_refused_key_puts_the_integration_inerror(
    db: Database, workspace: dict[str, Any], tmp_path: Any, fake: StripeFake
) -> None:
    fake.lists["subscriptions"] = [subscription()]
    raw = {"secret_key": KEY, "webhook_secret": WEBHOOK_SECRET, "app_id": workspace["app_id"], "base_url": fake.url}
    integration_id = connect(db, workspace["workspace_id"], TYPE, raw)

    def run() -> SyncOutcome:
        with db.write() as conn:
            sync, _ = repo.request_sync_for_operator(conn, integration_id=integration_id)
        outcome = execute_sync(db, LocalLake(tmp_path / "lake"), NOTIFICATIONS_KEY, sync.id, "run-1")
        assert outcome is not None
        return outcome

    assert run().status == "succeeded" and _active(db, workspace, "user-7")
    swept = len(fake.paths("/v1/subscriptions"))
    assert run().status == "succeeded"
    assert len(fake.paths("/v1/subscriptions")) == swept  # the stored cursor: no second sweep

    fake.key = "sk_live_rolled_since"  # the key was rolled in Stripe's dashboard
    refused = run()
    assert (refused.status, refused.error_code) == ("failed", "auth")
    with db.read() as conn:
        integration = repo.get_integration_for_operator(conn, integration_id=integration_id)
    assert integration.status == "error" and "Invalid API Key provided" in (integration.error_message or "")


def test_retry_after_in_seconds_or_as_an_http_date() -> None:
    assert retry_after({"retry-after": "2"}) == 2.0  # header names are case-insensitive
    in_a_minute = email.utils.formatdate(time.time() + 60, usegmt=True)
    assert 55 <= (retry_after({"Retry-After": in_a_minute}) or 0) <= 60
    assert retry_after({"Retry-After": "soon"}) is None and retry_after(None) is None


def test_a_restricted_key_without_the_permission_is_an_auth_failure(
    db: Database, workspace: dict[str, Any], tmp_path: Any, fake: StripeFake
) -> None:
    fake.failures = [
        error(403, "The provided key 'rk_live_****1234' does not have the required permissions for this endpoint")
    ]
    with pytest.raises(ClientError) as failure:
        _sync(_config(workspace, fake.url), _target(db, workspace, tmp_path))
    assert failure.value.code == "auth" and failure.value.status == 403
    assert "does not have the required permissions" in failure.value.message


def test_a_trialing_subscription_read_by_the_sweep_grants_and_lands_its_trial_start_once(
    db: Database, workspace: dict[str, Any], tmp_path: Any, fake: StripeFake
) -> None:
    trialing = {**subscription("trialing"), "trial_start": NOW - 3600, "trial_end": NOW + 6 * 86400}
    fake.lists["subscriptions"] = [trialing]
    fake.lists["events"] = [_event(1, "customer.subscription.created", trialing, at=NOW - 3600)]
    _sync(_config(workspace, fake.url), _target(db, workspace, tmp_path))
    assert _active(db, workspace, "user-7")
    assert [e["event_id"] for e in landed(db)] == ["stripe:sub_1:trial_start"]


# --- one-time purchases on API versions since 2025-03-31 -------------------------------------


def _grants(db: Database, workspace: dict[str, Any], user: str) -> list[str]:
    with db.read() as conn:
        rows = ledger.grants_of(conn, workspace_id=workspace["workspace_id"], app_id=workspace["app_id"], user_id=user)
    return [r.store_key for r in rows]


def _one_time_sale(fake: StripeFake) -> tuple[dict[str, Any], dict[str, Any]]:
    """A lifetime purchase paid two hours ago and refunded since, as Stripe's newer API versions
    show it: the invoice names no PaymentIntent, its invoice payment does, and the charge too."""
    paid = NOW - 7200
    fake.lists["invoice_payments"] = [invoice_payment("inpay_9", invoice="in_9", payment_intent="pi_9", at=paid)]
    return one_time_invoice("in_9", at=paid), refunded_charge("ch_9", payment_intent="pi_9", at=paid)


def test_a_one_time_purchase_read_from_events_is_keyed_by_its_payment_intent_and_revoked_by_the_refund(
    db: Database, workspace: dict[str, Any], tmp_path: Any, fake: StripeFake
) -> None:
    invoice, charge = _one_time_sale(fake)
    fake.lists["events"] = [_event(1, "invoice.paid", invoice, at=invoice["created"])]
    target = _target(db, workspace, tmp_path)
    _sync(_config(workspace, fake.url), target)
    assert _active(db, workspace, "user-9") and _grants(db, workspace, "user-9") == ["pi_9"]
    assert [p for p in fake.paths("/v1/invoice_payments") if "invoice=in_9" in p]

    fake.lists["events"].append(_event(2, "charge.refunded", charge, at=NOW - 5))
    again = _target(db, workspace, tmp_path, state=json.loads(json.dumps(target.state)))
    _sync(_config(workspace, fake.url), again)
    assert not _active(db, workspace, "user-9")
    assert _kinds(db) == [("user-9", "purchase", 49.99), ("user-9", "refund", -49.99)]


def test_a_one_time_purchase_read_by_the_sweep_is_revoked_by_a_listed_refund(
    db: Database, workspace: dict[str, Any], tmp_path: Any, fake: StripeFake
) -> None:
    invoice, charge = _one_time_sale(fake)
    fake.lists["invoices"] = [invoice]
    fake.lists["refunds"] = [{"id": "re_9", "object": "refund", "charge": charge, "created": NOW - 5}]
    _sync(_config(workspace, fake.url), _target(db, workspace, tmp_path))
    assert not _active(db, workspace, "user-9") and _grants(db, workspace, "user-9") == ["pi_9"]
    assert _kinds(db) == [("user-9", "purchase", 49.99), ("user-9", "refund", -49.99)]


def _webhook(client: FlaskClient, integration: str, sent: dict[str, Any]) -> Any:
    r = post_event(client, integration, sent)
    assert r.status_code == 200, r.json
    return r.json


@pytest.mark.parametrize("webhook_first", [True, False])
def test_a_webhook_and_a_sync_of_one_purchase_make_one_grant_whatever_the_api_version(
    client: FlaskClient, db: Database, workspace: dict[str, Any], tmp_path: Any, fake: StripeFake, webhook_first: bool
) -> None:
    """The webhook endpoint on an API version before 2025-03-31 (the invoice names its
    PaymentIntent), the sync's client on a later one (only its payments do), or both later:
    one purchase, one grant, one `purchase` event, and the refund revokes it."""
    raw = {"secret_key": KEY, "webhook_secret": WEBHOOK_SECRET, "app_id": workspace["app_id"], "base_url": fake.url}
    integration = connect(db, workspace["workspace_id"], TYPE, raw)
    invoice, charge = _one_time_sale(fake)
    older = one_time_invoice("in_9", at=invoice["created"], payment_intent="pi_9")
    fake.lists["invoices"] = [invoice]
    fake.lists["events"] = [_event(1, "invoice.paid", invoice, at=invoice["created"])]
    target = _target(db, workspace, tmp_path)
    if webhook_first:
        assert _webhook(client, integration, _event(1, "invoice.paid", invoice, at=invoice["created"]))["status"] == (
            "applied"
        )
        _sync(_config(workspace, fake.url), target)
    else:
        _sync(_config(workspace, fake.url), target)
        _webhook(client, integration, _event(7, "invoice.paid", older, at=invoice["created"]))
    assert _grants(db, workspace, "user-9") == ["pi_9"] and _active(db, workspace, "user-9")
    assert [e["event_id"] for e in landed(db)] == ["stripe:in_9:purchase"]

    _webhook(client, integration, _event(2, "charge.refunded", charge, at=NOW - 5))
    fake.lists["events"].append(_event(2, "charge.refunded", charge, at=NOW - 5))
    _sync(_config(workspace, fake.url), _target(db, workspace, tmp_path, state=json.loads(json.dumps(target.state))))
    assert not _active(db, workspace, "user-9") and _grants(db, workspace, "user-9") == ["pi_9"]
    assert [e["event_id"] for e in landed(db)] == ["stripe:in_9:purchase", "stripe:ch_9:refund"]


def test_a_subscription_charges_refund_read_by_the_sync_names_its_subscription(
    db: Database, workspace: dict[str, Any], tmp_path: Any, fake: StripeFake
) -> None:
    """The sync asks Stripe, as the webhook does, which invoice the refunded charge's
    PaymentIntent paid: the refund lands with the subscription as `purchase_key`, the ledger's
    key of the purchase, and its user (API 2025-03-31: the charge names no invoice)."""
    paid = NOW - 7200
    fake.lists["subscriptions"] = [subscription()]
    fake.lists["invoices"] = [subscription_invoice("in_s", at=paid, billing_reason="subscription_create")]
    fake.lists["invoice_payments"] = [invoice_payment("inpay_s", invoice="in_s", payment_intent="pi_s", at=paid)]
    charge = refunded_charge("ch_s", payment_intent="pi_s", at=paid, customer="cus_1")
    fake.lists["events"] = [_event(2, "charge.refunded", charge, at=NOW - 5)]
    _sync(_config(workspace, fake.url), _target(db, workspace, tmp_path))
    refund = next(e for e in landed(db) if e["event_type"] == "refund")
    assert refund["user_id"] == "user-7"
    assert (refund["properties"]["purchase_key"], refund["properties"]["transaction_id"]) == ("sub_1", "in_s")
