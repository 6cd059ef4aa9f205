"""Resources of webhook delivery: the HTTP client that sends, and the queue's tuning and clock."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

import dagster as dg
from pydantic import PrivateAttr

from clients.webhooks import WebhookSender
from transforms.webhooks.urls import Resolver
from warehouse.db import utcnow


class WebhookHttpClient(dg.ConfigurableResource):
    """The settings of webhook sends, and the `clients.webhooks.WebhookSender` built from them
    once per run (the sender's docstring says how a send is made safe: pinned addresses, no
    redirects, no proxies)."""

    # 3.05 s: just above a multiple of the 3 s TCP retransmission window; 10 s read: receivers
    # are told to answer 200 at once and process asynchronously (spec delivery rule 3).
    connect_timeout_s: float = 3.05
    read_timeout_s: float = 10.0
    pool_size: int = 32
    allow_private: bool = False  # FLOKIT_WEBHOOKS_ALLOW_PRIVATE, bound at the composition root
    ca_bundle: str | None = None  # CA certificates (PEM file) to verify endpoints by; None: certifi's

    _sender: WebhookSender | None = PrivateAttr(default=None)
    _setup_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _resolver: Resolver | None = PrivateAttr(default=None)  # None: the operating system's

    def with_resolver(self, resolver: Resolver) -> WebhookHttpClient:
        """This client, resolving host names with `resolver` from its next connection on.

        For tests: a resolver that answers differently on successive calls acts as a name that rebinds.
        """
        with self._setup_lock:
            self._resolver = resolver
            if self._sender is not None:
                self._sender.close()
                self._sender = None
        return self

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self._sender = WebhookSender.build(
            allow_private=self.allow_private,
            connect_timeout_s=self.connect_timeout_s,
            read_timeout_s=self.read_timeout_s,
            pool_size=self.pool_size,
            ca_bundle=self.ca_bundle,
            resolver=self._resolver,
        )

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._sender is not None:
            self._sender.close()

    def post(self, *, url: str, body: bytes, headers: dict[str, str]) -> tuple[int | None, str | None]:
        """(status code, None) for any HTTP answer, (None, error text) when none came back."""
        status_code, error, _ = self.exchange(url=url, body=body, headers=headers)
        return status_code, error

    def exchange(self, *, url: str, body: bytes, headers: dict[str, str]) -> tuple[int | None, str | None, str | None]:
        """As `post`, plus the start of the answer's body as text (`WebhookSender.exchange`)."""
        sender = self._sender
        if sender is None:  # used outside a run (benchmarks' baseline, scripts), or a new resolver
            with self._setup_lock:
                if self._sender is None:
                    self.setup_for_execution(dg.build_init_resource_context())
                sender = self._sender
        assert sender is not None
        return sender.exchange(url=url, body=body, headers=headers)


class WebhookQueue(dg.ConfigurableResource):
    """How a delivery run drains the queue, and the clock it reads (injectable for tests)."""

    batch_size: int = 200  # deliveries claimed per round
    max_workers: int = 32  # concurrent sends (I/O bound: threads)
    # A claim's lease, renewed every `renew_every_s` while the run lives: a killed run's
    # deliveries are due again within `lease_s`, and a renewal may miss twice before it lapses.
    lease_s: float = 20.0
    renew_every_s: float = 5.0
    # A short run (lifetime_s 0) stops claiming after this long; the sensor requests another.
    max_run_s: float = 60.0
    # A long-lived drain run (the deployment's FLOKIT_WEBHOOK_DRAIN_LIFETIME_S, bound at the
    # composition root) waits for work and drains for this long, then exits and the sensor
    # relaunches its slot. 0 (the default, for tests and scripts that run the job in process):
    # drain what is due and stop, as one short run.
    lifetime_s: float = 0.0
    # Between drains, a long-lived run waits this long for a wake-up (PostgreSQL LISTEN) before
    # it looks with a read whether something fell due anyway (a retry whose backoff ended) ...
    wait_s: float = 1.0
    # ... and on SQLite, which has no notifications, it looks this often (one indexed read).
    poll_s: float = 0.2
    # A long-lived run's heartbeat (`warehouse.webhooks.drains`): written this often; the sensor
    # relaunches a slot whose beat is older than `stale_after_s` whatever Dagster's run status.
    beat_every_s: float = 2.0
    stale_after_s: float = 10.0
    backoff_scale: float = 1.0  # FLOKIT_WEBHOOK_BACKOFF_SCALE, bound at the composition root
    # Added to the wall clock: tests and drills move time (e.g. past a rotation overlap).
    clock_offset_s: float = 0.0

    def now(self) -> datetime:
        return utcnow() + timedelta(seconds=self.clock_offset_s)

    def scale(self) -> float:
        return self.backoff_scale
