"""The Dagster side of provider clients: a resource base that builds a `clients.http.ProviderHttp`.

The HTTP itself (sessions, retries, pacing, failure classification) is `clients.http`; what is
left here is what needs Dagster (a configurable resource).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import dagster as dg
import requests
from pydantic import PrivateAttr

from clients.http import USER_AGENT, Pacer, ProviderHttp, RetryRules, guarded_session


class ProviderClient(dg.ConfigurableResource):
    """Base of every provider client: `base_url`, the timeouts, and a lazily built `ProviderHttp`.

    A subclass names its provider, states its `rules()` (and `per_minute` pacing where the
    provider documents a rate), and lists its secret fields in `SECRET_FIELDS` so that they
    never appear in a repr (Dagster logs resources' reprs on errors)."""

    PROVIDER: ClassVar[str] = "provider"
    SECRET_FIELDS: ClassVar[frozenset[str]] = frozenset()

    base_url: str
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 60.0
    _http: ProviderHttp | None = PrivateAttr(default=None)

    def rules(self) -> RetryRules:
        return RetryRules()

    def per_minute(self) -> float | None:
        return None

    def http(self, log: Callable[[str], None] | None = None) -> ProviderHttp:
        if self._http is None:
            session = guarded_session()
            session.headers["User-Agent"] = USER_AGENT
            self._authorize(session)
            rate = self.per_minute()
            self._http = ProviderHttp(
                provider=self.PROVIDER,
                session=session,
                rules=self.rules(),
                timeout=(self.connect_timeout_s, self.read_timeout_s),
                pacer=Pacer(rate) if rate else None,
            )
        if log is not None:
            self._http.log = log
        return self._http

    def url(self, path: str) -> str:
        return self.base_url.rstrip("/") + "/" + path.lstrip("/")

    def _authorize(self, session: requests.Session) -> None:
        """Set the session's credentials (headers); every subclass with credentials overrides it."""

    def __repr_args__(self) -> Any:
        for name, value in super().__repr_args__():
            yield name, ("***" if name in self.SECRET_FIELDS and value else value)
