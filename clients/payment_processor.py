"""payment_processor: Stripe's API, read with Stripe's own library (events, subscriptions, customers, invoices).

Two readers. The gateway reads Stripe while it answers a Stripe webhook
(`api.notifications.payment_processor`: `reader`, `customer`, `invoice_payments`): no retries at
all, since a failed lookup answers Stripe 5xx and Stripe's redelivery is the retry; its failures
are `transforms.client_errors` (unreachable or too slow is `Unavailable` with `timed_out`, a refusal
`ProviderFailed`). The reconciliation sync (`orchestration.syncs.connectors.payment_processor`)
reads through `StripeSync`: stripe-python does not retry a 429 (`RateLimitError`;
design/integrations.md §1.6), and the client is built with `max_network_retries=0`, so every
retry is `StripeSync.call`'s: a 429 waits `Retry-After` when Stripe sends one, else an
exponential backoff; a 5xx or a connection failure backs off likewise; all within a per-request
attempt count and a per-sync budget of waiting, beyond which the sync fails (`rate_limited` or
`provider_error`) and the next one starts again from the same cursor.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import stripe

from clients.http import guarded_session, parse_retry_after
from clients.retry import RetryPolicy
from transforms.client_errors import ProviderFailed, Unavailable, error_for
from transforms.integrations.errors import MAX_PROVIDER_TEXT, code_for_status, truncate

T = TypeVar("T")
PAGE_SIZE = 100

# The processor answers Stripe within its own 10 s; a lookup that takes longer is a 504 (Stripe retries).
STRIPE_TIMEOUT_S = 10.0


def reader(secret_key: str, base_url: str | None) -> stripe.StripeClient:
    """A Stripe client with an integration's secret key (and its `base_url`, for a fake)."""
    return stripe.StripeClient(
        secret_key,
        base_addresses={"api": base_url} if base_url else None,
        max_network_retries=0,
        http_client=stripe.RequestsClient(timeout=STRIPE_TIMEOUT_S),
    )


@contextmanager
def _asking(what: str) -> Iterator[None]:
    """Stripe's exceptions as `transforms.client_errors`, with the words the gateway answers with."""
    try:
        yield
    except stripe.APIConnectionError as e:
        if "Timeout" in str(e):
            raise Unavailable(f"Stripe did not answer {what} in time", timed_out=True) from None
        raise Unavailable(f"Stripe is unreachable for {what}") from None
    except stripe.StripeError as e:
        raise ProviderFailed(f"Stripe failed {what}: {e.user_message or e}", status=e.http_status) from None


def customer(client: stripe.StripeClient, customer_id: str) -> dict[str, Any] | None:
    """The Customer object; None when Stripe does not know it (deleted or unknown: 404)."""
    with _asking("the customer lookup"):
        try:
            found = client.v1.customers.retrieve(customer_id)
        except stripe.InvalidRequestError as e:
            if e.http_status == 404:
                return None
            raise
    return found.to_dict()


def invoice_payments(client: stripe.StripeClient, invoice: str) -> list[dict[str, Any]]:
    """The invoice's payments (`GET /v1/invoice_payments?invoice=`, every page)."""
    with _asking(f"the payments of invoice {invoice}"):
        listed = client.v1.invoice_payments.list({"invoice": invoice, "limit": 100})
        return [p.to_dict() for p in listed.auto_paging_iter()]


def invoice(client: stripe.StripeClient, invoice_id: str) -> dict[str, Any] | None:
    """The Invoice; None when Stripe does not know it (404)."""
    with _asking(f"invoice {invoice_id}"):
        try:
            found = client.v1.invoices.retrieve(invoice_id)
        except stripe.InvalidRequestError as e:
            if e.http_status == 404:
                return None
            raise
    return found.to_dict()


def payment_invoice(client: stripe.StripeClient, payment_intent: str) -> str | None:
    """The invoice a PaymentIntent paid (`GET /v1/invoice_payments?payment[type]=payment_intent&
    payment[payment_intent]=`, API versions since 2025-03-31); None when it paid none, or the API
    answers 404 (a stand-in without invoice payments)."""
    with _asking(f"the invoice paid by {payment_intent}"):
        try:
            listed = client.v1.invoice_payments.list(
                {"payment": {"type": "payment_intent", "payment_intent": payment_intent}, "limit": 1}
            )
        except stripe.InvalidRequestError as e:
            if e.http_status == 404:
                return None
            raise
    found = [p.to_dict() for p in listed.data]
    invoice_id = found[0].get("invoice") if found else None
    return invoice_id if isinstance(invoice_id, str) and invoice_id else None


RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


def _no_log(_line: str) -> None:
    return None


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """`Retry-After` from a Stripe error's headers (any spelling of the name)."""
    return parse_retry_after(next((v for k, v in (headers or {}).items() if k.lower() == "retry-after"), None))


def _message(exc: stripe.StripeError) -> str:
    """Stripe's own message from its JSON error; never the text of an answer that was not Stripe's
    (the library quotes a non-JSON body whole in `str(exc)`)."""
    status = f" (HTTP {exc.http_status})" if exc.http_status else ""
    return truncate(exc.user_message or "", MAX_PROVIDER_TEXT) or f"{type(exc).__name__}{status}"


@dataclass(kw_only=True)
class StripeSync(RetryPolicy):
    """The integration's Stripe client with FloKit's retry policy (`clients.retry`: a
    `Retry-After` longer than `max_wait_s` is not waited out, the sync fails `rate_limited`) and,
    on top of it, a budget for all the waits of one sync together (the module docstring)."""

    secret_key: str = field(repr=False)
    base_url: str = "https://api.stripe.com"
    budget_s: float = 300.0  # all waits of one sync together
    timeout_s: float = 60.0
    log: Callable[[str], None] = _no_log
    calls: int = 0
    rate_limited: int = 0
    waited_s: float = 0.0
    _client: stripe.StripeClient | None = field(default=None, repr=False)

    @property
    def stripe(self) -> stripe.StripeClient:
        if self._client is None:
            self._client = stripe.StripeClient(
                self.secret_key,
                base_addresses={"api": self.base_url},
                max_network_retries=0,
                # Our session: the egress policy's connections, no redirects (clients/http.py).
                http_client=stripe.RequestsClient(timeout=self.timeout_s, session=guarded_session()),
            )
        return self._client

    def call(self, what: str, request: Callable[[], T], *, missing_ok: bool = False) -> T | None:
        """One request, retried by the rules above; None for a 404 when `missing_ok`."""
        for attempt in range(1, self.attempts + 1):
            self.calls += 1
            try:
                return request()
            except stripe.APIConnectionError as exc:
                status, asked, failure = None, None, error_for("provider_error", f"{what}: {_message(exc)}")
            except stripe.StripeError as exc:
                status = exc.http_status
                if missing_ok and status == 404:
                    return None
                code = code_for_status(status) if status is not None else "bad_response"
                failure = error_for(code, f"{what}: HTTP {status}: {_message(exc)}", status=status)
                if status not in RETRY_STATUSES:
                    raise failure from None
                asked = retry_after(exc.headers)
                if status == 429:
                    self.rate_limited += 1
            wait = self.next_wait(attempt, asked)
            if wait is None or self.waited_s + wait > self.budget_s:
                tried = f" (after {attempt} attempt(s), {self.waited_s:.1f} s waited)"
                raise error_for(failure.code, failure.message + tried, status=status) from None
            self.log(
                f"Stripe: {what} answered {status or 'no connection'}; waiting {wait:.2f} s "
                f"({'Retry-After' if asked is not None else 'backoff'}), attempt {attempt + 1}"
            )
            self.sleep(wait)
            self.waited_s += wait
        raise AssertionError("unreachable: the last attempt returns or raises")

    def pages(
        self, what: str, lister: Callable[[Any], Any], params: Mapping[str, Any]
    ) -> Iterator[list[dict[str, Any]]]:
        """A list's pages as plain dicts, following `starting_after` while `has_more`."""
        after: str | None = None
        while True:
            query = {**params, "limit": PAGE_SIZE, **({"starting_after": after} if after else {})}
            page = self.call(what, functools.partial(lister, query))
            data = getattr(page, "data", None)
            if not isinstance(data, list):
                raise error_for("bad_response", f"{what}: not a Stripe list")
            objects = [o.to_dict() if isinstance(o, stripe.StripeObject) else o for o in data]
            if not all(isinstance(o, dict) and isinstance(o.get("id"), str) for o in objects):
                raise error_for("bad_response", f"{what}: a listed object has no id")
            yield objects
            if not getattr(page, "has_more", False) or not objects:
                return
            if objects[-1]["id"] == after:
                raise error_for("bad_response", f"{what}: starting_after {after} does not move on")
            after = objects[-1]["id"]
