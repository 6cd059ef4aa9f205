"""The OpenAPI 3.1 document, built from the app's url_map and the models each route declares."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any, Literal

from flask import Flask
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema
from werkzeug.routing import Rule

from api.errors import GatewayError, V1Error
from api.openapi.validation import AUTH_ATTR, OPERATION_ATTR, Operation
from api.ratelimits import EXEMPT_ENDPOINTS as RATE_LIMIT_EXEMPT

_REF = "#/components/schemas/{model}"


SECURITY_SCHEMES: dict[str, dict[str, Any]] = {
    "bearerAuth": {
        "type": "http",
        "scheme": "bearer",
        "description": "v1 API key (`flk_...`): read-only for GET, read-write for every POST and DELETE.",
    },
    "appKey": {"type": "apiKey", "in": "header", "name": "x-app-key", "description": "App publishable key `pk_...`."},
    "ingestSecret": {"type": "apiKey", "in": "query", "name": "secret", "description": "Vendor shared secret."},
}


def find(view: Callable[..., Any], attr: str) -> Any:
    """An attribute set by one of our decorators anywhere in the view's wrapper chain."""
    while view is not None:
        if hasattr(view, attr):
            return getattr(view, attr)
        view = getattr(view, "__wrapped__", None)  # type: ignore[assignment]
    return None


def openapi_path(rule: Rule) -> str:
    """`/v1/actions/<action_id>` -> `/v1/actions/{action_id}` (converters dropped)."""
    out, i = [], 0
    text = rule.rule
    while i < len(text):
        if text[i] == "<":
            end = text.index(">", i)
            out.append("{" + text[i + 1 : end].split(":")[-1] + "}")
            i = end + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def documented_rules(app: Flask) -> Iterable[tuple[Rule, str]]:
    """Every (rule, method) the app answers, the way a client sees it. The dashboard's pages are
    for people in a browser, not an API: they are left out."""
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static" or rule.endpoint.startswith("dashboard."):
            continue
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            yield rule, method


# Which surface each blueprint belongs to (passthrough is served on the gateway host).
SURFACE_OF_BLUEPRINT = {
    "v1": "v1",
    "gateway": "gateway",
    "passthrough": "gateway",
    "ingest": "ingest",
    "processor": "processor",
}


def surface_of(rule: Rule) -> str | None:
    """The surface a route belongs to; None for routes every surface serves (/healthz, /docs)."""
    blueprint, dot, _ = rule.endpoint.partition(".")
    return SURFACE_OF_BLUEPRINT.get(blueprint) if dot else None


def _error_statuses(rule: Rule, op: Operation, auth: str | None, scheme: str | None) -> list[int]:
    """The refusals an operation can answer besides the ones it declares, from what it takes."""
    errors = set(op.errors)
    if (op.query is not None and op.validate_query) or op.body is not None:
        errors |= {400}
    if op.body is not None:
        errors |= {413}
    if rule.arguments:
        errors |= {404}
    if scheme == "bearerAuth":
        errors |= {401, 403} if auth == "write" else {401}
    if op.database and 503 not in op.responses:
        errors |= {503}
    if rule.endpoint not in RATE_LIMIT_EXEMPT:
        errors |= {429}  # api/ratelimits.py
    return sorted(errors)


def _operation(
    rule: Rule, method: str, op: Operation, auth: str | None, refs: dict[Any, Any], schemas: dict[str, Any]
) -> dict[str, Any]:
    """One operation object: its id, parameters, body, declared answers and the refusals it can give."""
    v1 = rule.endpoint.startswith("v1.")
    error_ref = refs[((V1Error if v1 else GatewayError), "serialization")]
    scheme = op.security or ("bearerAuth" if auth else None)
    item: dict[str, Any] = {
        "operationId": rule.endpoint.replace(".", "_") + (f"_{method.lower()}" if _many_methods(rule) else ""),
        "summary": op.summary,
    }
    if op.description:
        item["description"] = op.description
    tags = op.tags or ((rule.endpoint.split(".")[0],) if "." in rule.endpoint else ())
    if tags:
        item["tags"] = list(tags)
    parameters = [
        {
            "name": name,
            "in": "path",
            "required": True,
            "schema": op.path_params.get(name, {"type": "string"}),
        }
        for name in sorted(rule.arguments)
    ]
    if op.query is not None:
        parameters += _query_parameters(op.query, schemas)
    parameters += [
        {"name": name, "in": "header", "required": False, "description": text, "schema": {"type": "string"}}
        for name, text in op.headers.items()
    ]
    if parameters:
        item["parameters"] = parameters
    if op.body is not None:
        item["requestBody"] = {
            "required": op.body_required,
            "content": {"application/json": {"schema": refs[(op.body, "validation")]}},
        }
    responses: dict[str, Any] = {}
    for status, answer in sorted(op.responses.items()):
        responses[str(status)] = _response(status, answer, refs)
        if op.response_headers and status < 300:
            responses[str(status)]["headers"] = {
                name: {"description": text, "schema": {"type": "string"}} for name, text in op.response_headers.items()
            }
    for status in _error_statuses(rule, op, auth, scheme):
        responses[str(status)] = {
            "description": HTTPStatus(status).phrase,
            "content": {"application/json": {"schema": error_ref}},
        }
    for retried in ("429", "503"):
        if retried in responses:
            responses[retried]["headers"] = {"Retry-After": _RETRY_AFTER}
    item["responses"] = responses
    if scheme:
        item["security"] = [{scheme: []}]
    return item


def build_document(app: Flask, *, title: str, description: str, surface: str | None = None) -> dict[str, Any]:
    """The OpenAPI 3.1 document of every documented route this app serves (of one surface if given)."""
    found: list[tuple[Rule, str, Operation, str | None]] = []
    for rule, method in documented_rules(app):
        if surface is not None and surface_of(rule) not in (None, surface):
            continue
        view = app.view_functions[rule.endpoint]
        op = find(view, OPERATION_ATTR)
        if op is not None:
            found.append((rule, method, op, find(view, AUTH_ATTR)))

    models: list[tuple[type[BaseModel], Literal["validation", "serialization"]]] = []
    for _rule, _method, op, _auth in found:
        if op.body is not None:
            models.append((op.body, "validation"))
        models += [(m, "serialization") for m in op.responses.values() if isinstance(m, type)]
    models += [(V1Error, "serialization"), (GatewayError, "serialization")]
    refs, top = models_json_schema(list(dict.fromkeys(models)), ref_template=_REF)
    schemas: dict[str, Any] = dict(top.get("$defs", {}))

    paths: dict[str, dict[str, Any]] = {}
    used_schemes: set[str] = set()
    for rule, method, op, auth in found:
        scheme = op.security or ("bearerAuth" if auth else None)
        if scheme:
            used_schemes.add(scheme)
        paths.setdefault(openapi_path(rule), {})[method.lower()] = _operation(rule, method, op, auth, refs, schemas)

    components: dict[str, Any] = {"schemas": dict(sorted(schemas.items()))}
    if used_schemes:
        components["securitySchemes"] = {name: SECURITY_SCHEMES[name] for name in sorted(used_schemes)}
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": "1", "description": description},
        "paths": dict(sorted(paths.items())),
        "components": components,
    }


_RETRY_AFTER = {
    "description": "Seconds to wait before retrying: the operational database is unavailable.",
    "schema": {"type": "integer", "minimum": 1},
}


def _response(status: int, answer: type[BaseModel] | str | None, refs: dict[Any, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"description": HTTPStatus(status).phrase}
    if isinstance(answer, type):
        out["content"] = {"application/json": {"schema": refs[(answer, "serialization")]}}
    elif isinstance(answer, str):
        out["content"] = {answer: {"schema": {"type": "object" if answer == "application/json" else "string"}}}
    return out


def _many_methods(rule: Rule) -> bool:
    return len((rule.methods or set()) - {"HEAD", "OPTIONS"}) > 1


def _query_parameters(model: type[BaseModel], schemas: dict[str, Any]) -> list[dict[str, Any]]:
    schema = model.model_json_schema(ref_template=_REF)
    schemas.update(schema.get("$defs", {}))
    required = set(schema.get("required", []))
    params = []
    for name, prop in schema.get("properties", {}).items():
        prop = dict(prop)
        # `X | None = None` means "may be omitted"; a query string cannot carry a JSON null.
        branches = [b for b in prop.pop("anyOf", []) if b != {"type": "null"}]
        if len(branches) == 1:
            prop.update(branches[0])
        elif branches:
            prop["anyOf"] = branches
        description = prop.pop("description", None)
        prop.pop("title", None)
        param = {"name": name, "in": "query", "required": name in required, "schema": prop}
        if description:
            param["description"] = description
        params.append(param)
    return params
