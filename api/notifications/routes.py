"""HTTP glue of the processor: a Flask request to an `Incoming`, an `Answer` to a response."""

from __future__ import annotations

from flask import Response, current_app, jsonify, request

from api.context import state
from api.notifications import blueprint
from api.notifications.framework import HANDLER_MODULES, Answer, Context, Incoming, process
from api.openapi import operation

_CONTEXT = "flokit.processor"


def context() -> Context:
    """One per app (per worker process): its caches live as long as the worker."""
    found = current_app.extensions.get(_CONTEXT)
    if found is None:
        found = current_app.extensions[_CONTEXT] = Context(settings=state().settings, database=state().db)
    assert isinstance(found, Context)
    return found


def respond(answer: Answer) -> Response:
    response = jsonify(answer.body)
    response.status_code = answer.status
    return response


def handle(path: str, body: bytes, headers: dict[str, str], query_string: str) -> Response:
    """What the gateway calls in-process, and the processor's own routes."""
    return respond(process(Incoming(path, body, headers, query_string), context()))


def _route() -> Response:
    rule = request.url_rule.rule if request.url_rule else request.path
    return handle(rule, request.get_data(cache=False), dict(request.headers), request.query_string.decode("latin-1"))


for _path, (_provider, _) in HANDLER_MODULES.items():
    _view = operation(
        summary=f"Provider notification: {_provider}",
        description="Verified with the provider's own scheme, stored raw, applied to the entitlement ledger once. "
        "200 once applied (or a duplicate, or nothing to apply); 401 unverifiable; 5xx: the provider retries.",
        responses={200: "*/*"},
        errors=(400, 401, 500, 502, 504),
        tags=["processor"],
    )(_route)
    blueprint.add_url_rule(
        _path,
        endpoint="processor_" + _path.strip("/").replace("/", "_").replace("-", "_"),
        view_func=_view,
        methods=["POST"],
    )
