"""The config read's experiment step: which running experiment takes the user, and their variant.

Per worker, kept `config_cache_s` like the live configs: each paywall's experiments (a start, stop
or change reaches every worker within that time) and the exposures already read or written (an
exposure never changes once recorded, so keeping it is always right). A user's first exposure is
one insert that does nothing when another request recorded one first; the recorded one is served.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import cast

from flask import current_app, request

from api.context import state
from api.errors import ApiError
from transforms.experiments import audience as audiences
from transforms.experiments.serving import first_variant
from warehouse.db import Database, utcnow
from warehouse.entitlements import ledger
from warehouse.experiments import repository as experiments
from warehouse.experiments.repository import Experiment, PaywallExperiments

CACHE = "flokit.paywall_experiments"
_MAX_PAYWALLS = 10_000  # app ids come from clients: made-up ones must not grow it forever
_MAX_EXPOSURES = 200_000  # (experiment, user) pairs kept per worker, oldest dropped first


@dataclass(frozen=True)
class Running:
    """A paywall's experiments as the config read uses them: the running ones in the order they
    are tried, each with its audience parsed once, and whether the paywall has any at all."""

    running: tuple[tuple[Experiment, audiences.Audience | None], ...]
    any: bool


def _running(found: PaywallExperiments) -> Running:
    return Running(tuple((x, audiences.parse_audience(x.audience)) for x in found.running), found.any)


class LiveExperiments:
    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self._clock = clock
        self._paywalls: dict[tuple[str, str], tuple[float, Running]] = {}
        self._exposures: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._lock = threading.Lock()

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

    def variant(self, db: Database, experiment: Experiment, user: str) -> str:
        """The user's variant in `experiment` (`holdout` for the holdout): recorded, else drawn and
        recorded now."""
        key = (experiment.id, user)
        known = self._exposures.get(key)
        if known is not None:
            return known
        with db.read() as conn:
            found = experiments.exposure(conn, experiment.id, user)
        if found is None:
            drawn = first_variant(
                experiment.salt, experiment.variants, experiment.holdout_pct,
                app_id=experiment.app_id, paywall_id=experiment.paywall_id, identity=user,
            )  # fmt: skip
            with db.write() as conn:
                found = experiments.record_exposure(conn, experiment.id, user, drawn, experiment.version, utcnow())
        with self._lock:
            self._exposures[key] = found.variant_id
            while len(self._exposures) > _MAX_EXPOSURES:
                self._exposures.popitem(last=False)
        return found.variant_id


def live_experiments() -> LiveExperiments:
    found = current_app.extensions.get(CACHE)
    if found is None:
        found = current_app.extensions.setdefault(CACHE, LiveExperiments(state().settings.config_cache_s))
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
                self._parsed = audiences.context_from(request.args, cast(Mapping[str, str], request.headers))
            except audiences.InvalidContext as exc:
                raise ApiError(400, str(exc)) from None
        needs = audiences.needs(audience)
        context = self._parsed
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
        return live.variant(db, experiment, user)
    return None
