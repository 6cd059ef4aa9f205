"""One drain of the webhook queue: claim, send concurrently, record each send as it completes.

What a crash may cost is what was in flight, nothing more:
- Sends are recorded as they complete. After each wait, every send that has completed is
  written in one transaction, in completion order (the endpoint's failure streak is counted in
  that order). Under load that is a group commit of whatever finished meanwhile; when sends
  trickle in, each is written alone. Senders never run more than `max_workers` sends ahead of
  the recorder, so a crash re-sends at most 2 x `max_workers` deliveries.
- Leases are short (`WebhookQueue.lease_s`, 20 s) and renewed every `renew_every_s` by a
  thread while the run is alive, so a killed run's deliveries are due again within one lease,
  and a slow receiver (10 s read timeout) never outlives its lease.
- Claims top up the sends in flight, so one slow endpoint does not hold up a round.

`drain` empties the queue once; `serve` is the long-lived run's loop around it: it waits for a
wake-up (PostgreSQL LISTEN, or a short poll on SQLite) between drains, beats its slot's
heartbeat, and exits at its planned end.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from orchestration.webhooks.resources import WebhookHttpClient, WebhookQueue
from transforms.webhooks.backoff import DISABLE_AFTER_FAILURES
from transforms.webhooks.signing import request_headers
from warehouse.db import Database, utcnow
from warehouse.webhooks import delivery_queue, drains
from warehouse.webhooks.delivery_queue import Claimed, SendResult
from warehouse.webhooks.wakeup import Wakeups

# After a claim found nothing due, wait this long before looking again while sends are in flight
# (each look is a write transaction; retries that fall due meanwhile wait at most this much).
IDLE_CLAIM_S = 1.0


def send(claimed: Claimed, http: WebhookHttpClient, queue: WebhookQueue) -> SendResult:
    """One physical send, signed at send time (fresh timestamp and signatures every attempt)."""
    started = queue.now()
    headers = request_headers(
        body=claimed.body,
        secrets=claimed.secrets,
        now_ms=int(started.timestamp() * 1000),
        event_id=claimed.event_id,
        delivery_id=claimed.delivery_id,
        attempt=claimed.attempt,
        standard_webhooks=claimed.standard_webhooks,
    )
    status_code, error, excerpt = http.exchange(url=claimed.url, body=claimed.body, headers=headers)
    return SendResult(
        status_code=status_code, error=error, started_at=started, finished_at=queue.now(), response_excerpt=excerpt
    )


@dataclass
class DrainReport:
    # succeeded | pending | failed | lost, and held_back: claimed, unsent (the endpoint kept failing)
    counts: Counter[str] = field(default_factory=Counter)
    disabled: list[str] = field(default_factory=list)  # endpoints this drain disabled

    @property
    def sends(self) -> int:
        return sum(n for status, n in self.counts.items() if status != "held_back")

    def add(self, other: DrainReport) -> None:
        self.counts.update(other.counts)
        self.disabled.extend(other.disabled)


class LeaseKeeper:
    """Renews the leases of the deliveries a drain holds, from a thread, until it stops."""

    def __init__(self, db: Database, queue: WebhookQueue, log: logging.Logger) -> None:
        self._db, self._queue, self._log = db, queue, log
        self._held: Counter[str] = Counter()  # lease token -> deliveries not yet recorded
        self._lock = threading.Lock()
        # Held by a renewal's transaction and by the drain's recording: on PostgreSQL the two
        # lock the same rows in different orders and deadlocked (measured in the benchmark:
        # "deadlock detected" on a renewal); one at a time within a drain, they cannot.
        self.writing = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="webhook-leases", daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def hold(self, batch: list[Claimed]) -> None:
        with self._lock:
            self._held.update(c.lease_token for c in batch)

    def release(self, recorded: list[Claimed]) -> None:
        with self._lock:
            self._held.subtract(c.lease_token for c in recorded)
            self._held = +self._held  # drop tokens with nothing left to renew

    def _run(self) -> None:
        while not self._stop.wait(self._queue.renew_every_s):
            with self._lock:
                tokens = sorted(self._held)
            if not tokens:
                continue
            try:
                with self.writing, self._db.write() as conn:
                    delivery_queue.renew_leases(
                        conn, tokens, now=self._queue.now(), lease=timedelta(seconds=self._queue.lease_s)
                    )
            except Exception as exc:  # a database hiccup: the next renewal may succeed in time
                self._log.warning(f"webhook leases not renewed: {type(exc).__name__}: {exc}")


def drain(
    db: Database,
    queue: WebhookQueue,
    http: WebhookHttpClient,
    log: logging.Logger,
    instance_key: str,
    *,
    deadline: float | None = None,
) -> DrainReport:
    """Send due deliveries until nothing is due or `deadline` (monotonic; by default
    `queue.max_run_s` from now) has passed; the signing secrets are unsealed with `instance_key`."""
    report = DrainReport()
    if deadline is None:
        deadline = time.monotonic() + queue.max_run_s
    scale = queue.scale()
    refill_at = max(1, queue.batch_size // 2)
    in_flight: dict[Future[SendResult | None], Claimed] = {}
    breaker = Breaker()
    gate = Gate(threading.Semaphore(2 * queue.max_workers))  # at most twice the senders unrecorded
    idle = False  # the last claim found nothing due
    next_claim = 0.0  # while idle with sends in flight: when to look again (monotonic)
    with (
        ThreadPoolExecutor(max_workers=queue.max_workers, thread_name_prefix="webhook") as pool,
        LeaseKeeper(db, queue, log) as leases,
        _stop_on_error(gate, in_flight),
    ):
        while True:
            now = time.monotonic()
            if not in_flight and (idle or now >= deadline):
                break
            if now < deadline and len(in_flight) <= refill_at and (not idle or now >= next_claim):
                with db.write() as conn:
                    batch = delivery_queue.claim(
                        conn,
                        now=queue.now(),
                        limit=queue.batch_size - len(in_flight),
                        lease=timedelta(seconds=queue.lease_s),
                        instance_key=instance_key,
                        skip_endpoints=breaker.failing(),
                    )
                leases.hold(batch)
                for c in batch:
                    in_flight[pool.submit(_send_unless_failing, c, http, queue, breaker, gate)] = c
                idle, next_claim = not batch, now + IDLE_CLAIM_S
                continue
            timeout = max(0.0, next_claim - now) if idle and now < deadline else None
            done, _ = wait(list(in_flight), timeout=timeout, return_when=FIRST_COMPLETED)
            if not done:
                continue
            finished = [(in_flight.pop(f), f.result()) for f in done]
            completed = sorted(((c, r) for c, r in finished if r is not None), key=lambda s: s[1].finished_at)
            held_back = [c for c, r in finished if r is None]
            with leases.writing:
                _record(db, completed, held_back, scale, report, log)
            leases.release([c for c, _ in finished])
            for _ in completed:
                gate.unrecorded.release()
            if not in_flight:
                idle = False  # what was just recorded may have made retries due: look once more
    return report


class Heartbeat:
    """Beats the drain slot's heartbeat from a thread every `queue.beat_every_s` while the run
    lives, and ends the slot when the run exits (the sensor may relaunch it at its next tick)."""

    def __init__(
        self, db: Database, queue: WebhookQueue, log: logging.Logger, *, slot: str, run_id: str, ends_at: datetime
    ) -> None:
        self._db, self._queue, self._log = db, queue, log
        self._slot, self._run_id, self._ends_at = slot, run_id, ends_at
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="webhook-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._beat()  # before the first claim: the sensor sees the slot taken at once
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()
        try:
            with self._db.write() as conn:
                drains.end(conn, slot=self._slot, run_id=self._run_id, now=utcnow())
        except Exception as exc:  # the beat goes stale instead: relaunched a few seconds later
            self._log.warning(f"webhook drain slot {self._slot} not released: {type(exc).__name__}: {exc}")

    def _beat(self) -> None:
        try:
            with self._db.write() as conn:
                drains.beat(conn, slot=self._slot, run_id=self._run_id, now=utcnow(), ends_at=self._ends_at)
        except Exception as exc:  # a database hiccup: the next beat may come in time
            self._log.warning(f"webhook drain heartbeat missed: {type(exc).__name__}: {exc}")

    def _run(self) -> None:
        while not self._stop.wait(self._queue.beat_every_s):
            self._beat()


def serve(
    db: Database,
    queue: WebhookQueue,
    http: WebhookHttpClient,
    log: logging.Logger,
    instance_key: str,
    *,
    slot: str,
    run_id: str,
    ends_at: datetime,
    wakeups: Wakeups,
    report_every_s: float = 60.0,
) -> DrainReport:
    """The long-lived drain: drain, wait for a wake-up, drain again, until `ends_at`.

    Woken (a notification, or the listener just (re)connected) it drains at once; after
    `queue.wait_s` without a wake-up (PostgreSQL) or every `queue.poll_s` (SQLite) it looks with
    one read whether something is due (a retry whose backoff ended, a lease that lapsed) and
    drains if so. It stops claiming at `ends_at`, finishes the sends in flight and returns.
    Logs a line of counts every `report_every_s` (never one per delivery: the Dagster event log
    stays small)."""
    total, since = DrainReport(), DrainReport()
    end = time.monotonic() + (ends_at - utcnow()).total_seconds()
    reported = time.monotonic()
    timeout = queue.wait_s if wakeups.listening else queue.poll_s
    woken = True  # look before the first wait: deliveries may have been due before this run
    with Heartbeat(db, queue, log, slot=slot, run_id=run_id, ends_at=ends_at):
        while (now := time.monotonic()) < end:
            if woken or _due(db, queue):
                since.add(drain(db, queue, http, log, instance_key, deadline=end))
            if now - reported >= report_every_s and since.counts:
                log.info(f"webhook sends in the last {now - reported:.0f} s: {dict(since.counts)}")
                total.add(since)
                since, reported = DrainReport(), now
            woken = wakeups.wait(max(0.0, min(timeout, end - time.monotonic())))
    total.add(since)
    return total


def _due(db: Database, queue: WebhookQueue) -> bool:
    with db.read() as conn:
        return delivery_queue.any_due(conn, queue.now())


@contextmanager
def _stop_on_error(gate: Gate, in_flight: dict[Future[SendResult | None], Claimed]) -> Iterator[None]:
    """On an error, no send not yet begun goes out: queued ones are cancelled, waiting ones give
    up. Their leases lapse and another drain sends them; those under way finish unrecorded."""
    try:
        yield
    except BaseException:
        gate.stopping.set()
        for future in in_flight:
            future.cancel()
        raise


class Breaker:
    """This drain's own count of consecutive failures per endpoint, kept as sends complete.

    Recording is the authority (it disables the endpoint, from its stored streak), but it runs
    after the sends: against a receiver that fails at once, a pool of senders would fire a whole
    claim at it before the fifth failure is committed. At five failures in a row here, the
    endpoint's sends not yet begun are held back and handed back to the queue unsent."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streak: Counter[str] = Counter()

    def open(self, endpoint_id: str) -> bool:
        with self._lock:
            return self._streak[endpoint_id] >= DISABLE_AFTER_FAILURES

    def failing(self) -> list[str]:
        """The endpoints this drain no longer sends to (its claims leave them out)."""
        with self._lock:
            return sorted(e for e, n in self._streak.items() if n >= DISABLE_AFTER_FAILURES)

    def observe(self, endpoint_id: str, result: SendResult) -> None:
        with self._lock:
            self._streak[endpoint_id] = 0 if result.ok else self._streak[endpoint_id] + 1


@dataclass
class Gate:
    """What a sender waits on before it sends.

    `unrecorded` bounds the sends under way or awaiting their record (a place is given back once
    the send is recorded), so that senders never run ahead of the recorder: what a crash can
    re-send is bounded by it whatever the load. `stopping` is set when the drain ends by an
    error (the database gone while recording): senders still waiting then give up unsent
    rather than block the pool's shutdown or send what will never be recorded."""

    unrecorded: threading.Semaphore
    stopping: threading.Event = field(default_factory=threading.Event)

    def enter(self) -> bool:
        while not self.unrecorded.acquire(timeout=0.2):
            if self.stopping.is_set():
                return False
        return not self.stopping.is_set()


def _send_unless_failing(
    claimed: Claimed, http: WebhookHttpClient, queue: WebhookQueue, breaker: Breaker, gate: Gate
) -> SendResult | None:
    """None, without sending, once the endpoint has failed five times in a row in this drain
    (only the sends already under way when the fifth failure came back still reach it), or once
    the drain is stopping."""
    if breaker.open(claimed.endpoint_id) or not gate.enter():
        return None
    result = send(claimed, http, queue)
    breaker.observe(claimed.endpoint_id, result)
    return result


def _record(
    db: Database,
    completed: list[tuple[Claimed, SendResult]],
    held_back: list[Claimed],
    scale: float,
    report: DrainReport,
    log: logging.Logger,
) -> None:
    with db.write() as conn:
        outcomes = delivery_queue.record_batch(conn, completed, backoff_scale=scale)
        if held_back:
            delivery_queue.release(conn, held_back)
    if held_back:
        report.counts["held_back"] += len(held_back)
    for (claimed, _), outcome in zip(completed, outcomes, strict=True):
        report.counts[outcome.status] += 1
        if outcome.endpoint_disabled:
            report.disabled.append(claimed.endpoint_id)
            log.warning(f"endpoint {claimed.endpoint_id} disabled after repeated failures")
