"""The config read's experiment step: which running experiment takes the user, and their variant.

Per worker, kept `config_cache_s` like the live configs: each paywall's experiments (a start, stop
or change reaches every worker within that time) and the exposures already read or written (an
exposure never changes once recorded, so keeping it is always right). A user's first exposure is
one insert that does nothing when another request recorded one first; the recorded one is served.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from flask import Flask, current_app, request

from api.context import state
from api.errors import ApiError
from transforms.experiments import audience as audiences
from transforms.experiments.assignment import Weighted
from transforms.experiments.serving import first_variant, settled_draw
from warehouse.db import Database, utcnow
from warehouse.entitlements import ledger
from warehouse.experiments import repository as experiments
from warehouse.experiments.repository import Experiment, PaywallExperiments

CACHE = "flokit.paywall_experiments"
log = logging.getLogger("flokit.api.experiments")
_MAX_PAYWALLS = 10_000  # app ids come from clients: made-up ones must not grow it forever
_MAX_EXPOSURES = 200_000  # (experiment, user) pairs kept per worker, oldest dropped first


@dataclass(frozen=True)
class Running:
    """A paywall's experiments as the config read uses them: the running ones in the order they
    are tried, each with its audience parsed once, and whether the paywall has any at all."""

    running: tuple[tuple[Experiment, audiences.Audience | None], ...]
    any: bool
    # Per running experiment, the split of each of its versions (what its exposures were drawn from).
    splits: dict[str, tuple[tuple[tuple[Weighted, ...], float], ...]]


def _running(found: PaywallExperiments) -> Running:
    return Running(tuple((x, audiences.parse_audience(x.audience)) for x in found.running), found.any, found.splits)


class ExposureWriter:
    """A worker's first exposures, written in batches off the request's path.

    A config read that draws a user's first variant queues the exposure and answers at once; this
    worker's thread writes the queue every `FLUSH_S` (or at `BATCH` rows) in one transaction of
    insert-or-nothing, then reads back what is recorded for the users whose draw was not settled
    (`settled_draw`: the versions disagree for them): where another host recorded first, the
    recorded variant replaces the drawn one in the worker's cache, so the user's next answer is the
    one that wins for the experiment's life. A settled draw equals whatever is recorded, so it is
    not read back. A synchronous insert cost a first read 1.7 ms more (2.5 ms against 0.8 ms in
    process); the gateway's budget is the read itself.

    What this gives up: an exposure still queued when the worker dies (at most `FLUSH_S` of them;
    a graceful exit writes them) is not recorded. The user's next read draws it again, the same
    variant while the weights have not changed, and records it then; a purchase made in between is
    not attributed to the experiment. Rows that fail to write (the database away) stay queued, up
    to `MAX_QUEUED`, and are retried."""

    FLUSH_S = 0.2  # one write transaction per worker 5 times a second at most, whatever the traffic
    BATCH = 500
    MAX_QUEUED = 100_000

    def __init__(self, db: Database, on_recorded: Callable[[dict[tuple[str, str], str]], None]) -> None:
        self._db = db
        self._on_recorded = on_recorded
        self._queue: list[dict[str, Any]] = []
        self._lock = threading.Lock()  # the queue
        self._flushing = threading.Lock()  # one write of the queue at a time
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def add(self, experiment: Experiment, user: str, variant_id: str, at: datetime, *, settled: bool) -> None:
        row = {"experiment_id": experiment.id, "user_id": user, "variant_id": variant_id,
               "experiment_version": experiment.version, "exposed_at": at, "settled": settled}  # fmt: skip
        with self._lock:
            if len(self._queue) >= self.MAX_QUEUED:
                log.warning("exposure queue full (%d): the oldest exposure is dropped", len(self._queue))
                self._queue.pop(0)
            self._queue.append(row)
            full = len(self._queue) >= self.BATCH
            if self._thread is None or self._pid != os.getpid():  # started in the worker, after a fork
                self._pid = os.getpid()
                self._wake = threading.Event()  # a parent's event is not this process's to share
                self._thread = threading.Thread(
                    target=_write_queued, args=(weakref.ref(self), self._wake), name="flokit-exposures", daemon=True
                )
                self._thread.start()
                _LIVE_WRITERS.add(self)
        if full:
            self._wake.set()

    def flush(self) -> int:
        """Write what is queued now; returns how many rows were written. A flush begun meanwhile
        (the thread's) is waited for first, so when this returns every exposure queued before the
        call is recorded: what a test or an exit relies on."""
        with self._flushing:
            return self._write_queued()

    def _write_queued(self) -> int:
        with self._lock:
            rows, self._queue = self._queue, []
        if not rows:
            return 0
        unsettled = [(r["experiment_id"], r["user_id"]) for r in rows if not r["settled"]]
        try:
            with self._db.write() as conn:
                recorded = experiments.record_exposures(
                    conn, [{k: v for k, v in r.items() if k != "settled"} for r in rows], read_back=unsettled
                )
        except BaseException:
            with self._lock:
                self._queue[:0] = rows
            raise
        self._on_recorded(recorded)
        return len(rows)


def _write_queued(writer_ref: weakref.ref[ExposureWriter], wake: threading.Event) -> None:
    """The writer's thread. It holds the writer only while writing: when the app that owns the
    writer is gone (a test's app, a reloaded one), the thread ends instead of waking forever."""
    while True:
        wake.wait(ExposureWriter.FLUSH_S)
        wake.clear()
        writer = writer_ref()
        if writer is None:
            return
        try:
            writer.flush()
        except Exception:  # the database away: the rows stay queued for the next round
            log.exception("writing exposures failed; %d queued for the next attempt", len(writer._queue))
            time.sleep(1.0)
        del writer


# The writers with a thread in this process, written once more when it exits (gunicorn's graceful
# stop, `flokit up` stopping): one exit hook for all of them, holding none of them alive.
_LIVE_WRITERS: weakref.WeakSet[ExposureWriter] = weakref.WeakSet()


@atexit.register
def _flush_at_exit() -> None:
    for writer in list(_LIVE_WRITERS):
        if writer._pid != os.getpid():
            continue  # a parent's writer: its rows are the parent's to write
        try:
            writer.flush()
        except Exception as exc:  # nothing left to retry with: say what is not recorded
            log.warning("exposures not written at exit (%d): %s", len(writer._queue), exc)


class LiveExperiments:
    def __init__(self, db: Database, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self._clock = clock
        self._paywalls: dict[tuple[str, str], tuple[float, Running]] = {}
        # (experiment, user) → (variant, the version a settled draw was made under; None when it
        # is what is recorded). A settled draw is valid while the experiment has that version: a
        # new split may unsettle it, and then what is recorded decides.
        self._exposures: OrderedDict[tuple[str, str], tuple[str, int | None]] = OrderedDict()
        self._lock = threading.Lock()
        self.writer = ExposureWriter(db, self._remember)

    def for_paywall(self, db: Database, app_id: str, paywall_id: str) -> Running:
        key, now = (app_id, paywall_id), self._clock()
        hit = self._paywalls.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]
        with db.read() as conn:
            found = _running(experiments.for_paywall(conn, app_id, paywall_id))
        if self.ttl > 0:
            with self._lock:
                if len(self._paywalls) >= _MAX_PAYWALLS:
                    self._paywalls.clear()
                self._paywalls[key] = (now + self.ttl, found)
        return found

    def _remember(self, recorded: dict[tuple[str, str], str], version: int | None = None) -> None:
        with self._lock:
            self._exposures.update((key, (variant, version)) for key, variant in recorded.items())
            while len(self._exposures) > _MAX_EXPOSURES:
                self._exposures.popitem(last=False)

    def variant(self, db: Database, found: Running, experiment: Experiment, user: str) -> str:
        """The user's variant in `experiment` (`holdout` for the holdout): recorded, else drawn
        now and queued to be recorded (`ExposureWriter`).

        A recorded exposure holds what the user drew under the version then in force, so when
        every version of the experiment draws the same variant for this user (always, until the
        weights first change) the draw is the answer whether or not one is recorded: no read, and
        the queued insert does nothing if one is. Only a user whose draw differs between versions
        is looked up."""
        key = (experiment.id, user)
        known = self._exposures.get(key)
        if known is not None and known[1] in (None, experiment.version):
            return known[0]
        variant = settled_draw(
            experiment.salt, (experiment.variants, experiment.holdout_pct), found.splits.get(experiment.id, ()),
            app_id=experiment.app_id, paywall_id=experiment.paywall_id, identity=user,
        )  # fmt: skip
        if variant is not None:
            self.writer.add(experiment, user, variant, utcnow(), settled=True)
            self._remember({key: variant}, experiment.version)  # valid while this version is
            return variant
        # The versions draw differently for this user: what was recorded decides.
        with db.read() as conn:
            recorded = experiments.exposure(conn, experiment.id, user)
        if recorded is not None:
            self._remember({key: recorded.variant_id})
            return recorded.variant_id
        variant = first_variant(
            experiment.salt, experiment.variants, experiment.holdout_pct,
            app_id=experiment.app_id, paywall_id=experiment.paywall_id, identity=user,
        )  # fmt: skip
        self.writer.add(experiment, user, variant, utcnow(), settled=False)  # read back once written
        self._remember({key: variant})
        return variant


def flush_exposures(app: Flask) -> int:
    """Write the app's queued exposures now (what its thread does every `ExposureWriter.FLUSH_S`):
    for a test or a command that reads them right after serving."""
    found = app.extensions.get(CACHE)
    return found.writer.flush() if found is not None else 0


def live_experiments() -> LiveExperiments:
    found = current_app.extensions.get(CACHE)
    if found is None:
        found = current_app.extensions.setdefault(CACHE, LiveExperiments(state().db, state().settings.config_cache_s))
    return found


class _Context:
    """The request's user context, parsed only when an audience asks for it, and the ledger's
    facts about the user looked up only when a condition needs them."""

    def __init__(self, db: Database, workspace_id: str, app_id: str, user: str, now: datetime) -> None:
        self.db, self.workspace_id, self.app_id, self.user, self.now = db, workspace_id, app_id, user, now
        self._parsed: audiences.UserContext | None = None
        self._entitlement: bool | None = None
        self._first_seen: tuple[datetime | None] | None = None

    def for_audience(self, audience: audiences.Audience) -> audiences.UserContext:
        if self._parsed is None:
            try:
                self._parsed = parsed_context(request.args, cast(Mapping[str, str], request.headers))
            except audiences.InvalidContext as exc:
                raise ApiError(400, str(exc)) from None
        needs = audiences.needs(audience)
        context = self._parsed
        if not needs:
            return context
        if "entitlement" in needs and self._entitlement is None:
            with self.db.read() as conn:
                found = ledger.current(conn, workspace_id=self.workspace_id, app_id=self.app_id, user_id=self.user)
            self._entitlement = found.active
        if "first_seen" in needs and self._first_seen is None:
            with self.db.read() as conn:
                self._first_seen = (experiments.first_seen(conn, self.app_id, self.user),)
        return audiences.UserContext(
            country=context.country,
            platform=context.platform,
            app_version=context.app_version,
            locale=context.locale,
            attributes=context.attributes,
            first_seen_at=self._first_seen[0] if self._first_seen else None,
            has_active_entitlement=self._entitlement,
        )


_PARAMETERS, _HEADERS = audiences.CONTEXT_PARAMETERS, audiences.CONTEXT_HEADERS
_MAX_CONTEXTS = 10_000  # the values come from clients: made-up ones must not grow it forever
_contexts: dict[tuple[str | None, ...], audiences.UserContext] = {}


def parsed_context(query: Mapping[str, str], headers: Mapping[str, str]) -> audiences.UserContext:
    """`audiences.context_from` of the request's context values, kept per process by those values:
    a few countries, platforms, versions and locales make nearly every request's context, and
    parsing one (the header scan, the version key, the locale ranges, the attributes' JSON) cost
    the config read about a tenth of its time. A malformed context raises every time (not kept)."""
    raw = tuple(query.get(p) for p in _PARAMETERS) + tuple(headers.get(h) for h in _HEADERS)
    found = _contexts.get(raw)
    if found is None:
        found = audiences.context_from(
            {p: v for p, v in zip(_PARAMETERS, raw[: len(_PARAMETERS)], strict=True) if v is not None},
            {h: v for h, v in zip(_HEADERS, raw[len(_PARAMETERS) :], strict=True) if v is not None},
        )
        if len(_contexts) >= _MAX_CONTEXTS:
            _contexts.clear()
        _contexts[raw] = found
    return found


def choose(db: Database, found: Running, *, app_id: str, user: str) -> str | None:
    """The variant id the user is served under the paywall's running experiments (`holdout`, or
    None when no running experiment takes the user: the default configuration)."""
    if not found.running:
        return None
    now = utcnow()
    context = _Context(db, found.running[0][0].workspace_id, app_id, user, now)
    live = live_experiments()
    for experiment, audience in found.running:
        if audience is not None and not audiences.matches(audience, context.for_audience(audience), now):
            continue
        return live.variant(db, found, experiment, user)
    return None
