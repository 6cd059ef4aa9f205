"""Resources of webhook delivery: the HTTP client that sends, and the queue's tuning and clock."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

import dagster as dg
import requests
from pydantic import PrivateAttr

from clients.dns import system_resolver
from clients.transport import AddressPolicy, PinnedAdapter
from transforms.webhooks.urls import InvalidUrl, Resolver, check_form
from warehouse.db import utcnow

# The start of a receiver's answer kept with each attempt (warehouse.webhooks.deliveries.EXCERPT_CHARS).
EXCERPT_BYTES = 500


class WebhookHttpClient(dg.ConfigurableResource):
    """POSTs signed bodies to customer endpoints with (connect, read) timeouts.

    No transport-level retries (the queue retries with backoff and records every send) and no
    redirects (a 3xx is a failed delivery: following it would send the signed body somewhere the
    operator never configured). The URL's form (https only unless private addresses are allowed)
    is checked again before every send, and every connection resolves the host once, checks every
    address and connects to a checked one (`transport.PinnedAdapter`): DNS may have changed since
    the endpoint was added, and a second lookup to connect could answer differently (rebinding).
    The environment is not trusted: no HTTP(S)_PROXY (a proxy resolves the host itself, out of our
    sight) and no .netrc credentials on requests to customer endpoints.
    """

    # 3.05 s: just above a multiple of the 3 s TCP retransmission window; 10 s read: receivers
    # are told to answer 200 at once and process asynchronously (spec delivery rule 3).
    connect_timeout_s: float = 3.05
    read_timeout_s: float = 10.0
    pool_size: int = 32
    allow_private: bool = False  # FLOKIT_WEBHOOKS_ALLOW_PRIVATE, bound at the composition root
    ca_bundle: str | None = None  # CA certificates (PEM file) to verify endpoints by; None: certifi's

    _session: requests.Session | None = PrivateAttr(default=None)
    _private_ok: bool = PrivateAttr(default=False)
    _setup_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _resolver: Resolver | None = PrivateAttr(default=None)  # None: the operating system's

    def with_resolver(self, resolver: Resolver) -> WebhookHttpClient:
        """This client, resolving host names with `resolver` from its next connection on.

        For tests: a resolver that answers differently on successive calls acts as a name that rebinds.
        """
        with self._setup_lock:
            self._resolver = resolver
            if self._session is not None:
                self._session.close()
                self._session = None
        return self

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self._private_ok = self.allow_private
        policy = AddressPolicy(resolver=self._resolver or system_resolver, allow_private=self._private_ok)
        adapter = PinnedAdapter(policy, pool_connections=self.pool_size, pool_maxsize=self.pool_size, max_retries=0)
        session = requests.Session()
        session.trust_env = False
        session.verify = self.ca_bundle or True
        session.mount("https://", adapter)
        session.mount("http://", adapter)
        session.headers["User-Agent"] = "FloKit-Webhooks/1"
        self._session = session

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._session is not None:
            self._session.close()

    def post(self, *, url: str, body: bytes, headers: dict[str, str]) -> tuple[int | None, str | None]:
        """(status code, None) for any HTTP answer, (None, error text) when none came back."""
        status_code, error, _ = self.exchange(url=url, body=body, headers=headers)
        return status_code, error

    def exchange(self, *, url: str, body: bytes, headers: dict[str, str]) -> tuple[int | None, str | None, str | None]:
        """As `post`, plus the first `EXCERPT_BYTES` of the answer's body as text (None when no
        answer came): the delivery history shows what the receiver said."""
        session = self._session
        if session is None:  # used outside a run (benchmarks' baseline, scripts), or a new resolver
            with self._setup_lock:
                if self._session is None:
                    self.setup_for_execution(dg.build_init_resource_context())
                session = self._session
        assert session is not None
        try:
            check_form(url, allow_private=self._private_ok)
            response = session.post(
                url,
                data=body,
                headers=headers,
                timeout=(self.connect_timeout_s, self.read_timeout_s),
                allow_redirects=False,
            )
            response.close()
        except InvalidUrl as exc:  # raised by the connection too, for a non-public address
            return None, f"refused: {exc}", None
        except requests.Timeout as exc:
            return None, f"timeout: {type(exc).__name__}", None
        except requests.RequestException as exc:
            return None, f"network error: {type(exc).__name__}: {exc}", None
        # The body was read already (no streaming); decoding a slice never guesses a charset.
        excerpt = response.content[:EXCERPT_BYTES].decode("utf-8", errors="replace")
        error = None if 200 <= response.status_code < 300 else f"HTTP {response.status_code}"
        return response.status_code, error, excerpt


class WebhookQueue(dg.ConfigurableResource):
    """How a delivery run drains the queue, and the clock it reads (injectable for tests)."""

    batch_size: int = 200  # deliveries claimed per round
    max_workers: int = 32  # concurrent sends (I/O bound: threads)
    # A claim's lease, renewed every `renew_every_s` while the run lives: a killed run's
    # deliveries are due again within `lease_s`, and a renewal may miss twice before it lapses.
    lease_s: float = 20.0
    renew_every_s: float = 5.0
    # A run stops claiming after this long; the sensor requests another for what is left.
    max_run_s: float = 60.0
    backoff_scale: float = 1.0  # FLOKIT_WEBHOOK_BACKOFF_SCALE, bound at the composition root
    # Added to the wall clock: tests and drills move time (e.g. past a rotation overlap).
    clock_offset_s: float = 0.0

    def now(self) -> datetime:
        return utcnow() + timedelta(seconds=self.clock_offset_s)

    def scale(self) -> float:
        return self.backoff_scale
