"""payment_processor: Stripe's API, read with Stripe's own library (customers, invoice payments).

The gateway reads Stripe while it answers a Stripe webhook (`api.processor.payment_processor`):
no retries of the library's own, since a failed lookup answers Stripe 5xx and Stripe's
redelivery is the retry. Failures are `clients.errors`: unreachable or too slow is
`Unavailable` (with `timed_out`), a refusal `ProviderFailed`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import stripe

from clients.errors import ProviderFailed, Unavailable

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
    """Stripe's exceptions as `clients.errors`, with the words the gateway answers with."""
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
