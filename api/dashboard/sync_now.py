"""The one shape of a dashboard "Sync now": a page with a status part that polls itself, a
confirm dialog, and a POST that writes a queue row (`warehouse.queue`) for the daemon.

An integration's page and an ad account's page are both this: the status part is served alone
to htmx (and a plain GET of it goes back to the page), the dialog's no-JavaScript trigger shows
the page with the form open, and the POST answers htmx with the status part (202 when a row was
written, 200 when an open one is the answer) and a browser with a redirect to the page saying
which row. What differs per page is declared on a `SyncNow`; nothing here calls a provider.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from flask import Blueprint, Response, redirect, url_for
from flask.typing import ResponseReturnValue

from api.context import state
from api.dashboard.pages import is_htmx, page
from warehouse.db import Connection
from warehouse.errors import TransitionRefused


class FullPage(Protocol):
    def __call__(
        self, thing_id: str, /, *, status: int = 200, confirm: bool = False, notice: str | None = None
    ) -> Response: ...


@dataclass(frozen=True)
class SyncNow:
    """A page's "Sync now". `status_context(conn, thing_id)` reads the thing in the signed-in
    workspace (NotFound otherwise) and what its status part shows; `ask(conn, thing_id)` writes
    the row and returns `(row id, created)`; `asked(row_id, created)` is the redirect's query."""

    endpoint: str  # the page's endpoint, e.g. "dashboard.integration"
    id_arg: str  # its URL argument, e.g. "integration_id"
    status_template: str
    status_context: Callable[[Connection, str], dict[str, Any]]
    full_page: FullPage
    ask: Callable[[Connection, str], tuple[str, bool]]
    refused_notice: Callable[[TransitionRefused], str]
    just_asked: str  # the status part's flag for a row written by this POST
    asked: Callable[[str, bool], dict[str, str]]
    # A refusal answers htmx with the status part (True) or with the whole page (False).
    refusal_in_status: bool = False

    def _status_part(self, thing_id: str, status: int = 200, **extra: Any) -> Response:
        with state().db.read() as conn:
            ctx = self.status_context(conn, thing_id)
        return page(self.status_template, status, **extra, **ctx)

    def status(self, thing_id: str) -> Response:
        """The part of the page that polls itself while a row is open."""
        with state().db.read() as conn:
            ctx = self.status_context(conn, thing_id)
        if not is_htmx():
            return redirect(self._url(thing_id), 303)  # type: ignore[return-value]
        return page(self.status_template, **ctx)

    def confirm(self, thing_id: str) -> Response:
        """Without JavaScript the dialog cannot open: its trigger leads here, to the same form."""
        return self.full_page(thing_id, confirm=True)

    def post(self, thing_id: str) -> ResponseReturnValue:
        try:
            with state().db.write() as conn:
                row_id, created = self.ask(conn, thing_id)
        except TransitionRefused as refused:
            notice = self.refused_notice(refused)
            if self.refusal_in_status and is_htmx():
                return self._status_part(thing_id, 409, notice=notice)
            return self.full_page(thing_id, status=409, notice=notice)
        if is_htmx():
            return self._status_part(thing_id, 202 if created else 200, **{self.just_asked: created})
        return redirect(self._url(thing_id, **self.asked(row_id, created)), 303)

    def add_routes(self, blueprint: Blueprint, page_url: str) -> None:
        """`<page_url>/status` (GET) and `<page_url>/sync` (GET the confirm page, POST the row),
        as the endpoints `<page>_status`, `<page>_sync_confirm` and `<page>_sync`."""
        name = self.endpoint.rsplit(".", 1)[-1]
        rules: list[tuple[str, str, str, Callable[[str], ResponseReturnValue]]] = [
            ("/status", "_status", "GET", self.status),
            ("/sync", "_sync_confirm", "GET", self.confirm),
            ("/sync", "_sync", "POST", self.post),
        ]
        for suffix, endpoint, method, view in rules:
            blueprint.add_url_rule(page_url + suffix, name + endpoint, self._view(view), methods=[method])

    def _view(self, view: Callable[[str], ResponseReturnValue]) -> Callable[..., ResponseReturnValue]:
        def answer(**url_values: str) -> ResponseReturnValue:
            return view(url_values[self.id_arg])

        return answer

    def _url(self, thing_id: str, **query: str) -> str:
        values: dict[str, Any] = {self.id_arg: thing_id, **query}
        return url_for(self.endpoint, **values)
