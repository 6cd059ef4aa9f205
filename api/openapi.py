"""Request validation and the OpenAPI 3.1 document, both from one declaration beside each route.

    @blueprint.post("/actions/<action_id>/approve")
    @require_key(write=True)
    @operation(summary="Approve a ready action", body=ApproveBody, responses={200: ApproveResult}, errors=(404, 409))
    def approve(action_id: str, body: ApproveBody) -> Response: ...

`operation` validates the query string and JSON body with the declared pydantic models (400 with
a message naming the field, rendered in the surface's error shape) and passes the parsed models
to the view as `query=` and `body=`. `build_document` walks the app's url_map and turns the same
models into the OpenAPI document (pydantic's JSON Schema 2020-12 is OpenAPI 3.1's schema
dialect), so the document lists exactly the routes this process serves: `/openapi.json` on a
process serving one surface is that surface's document. `require_key` marks the views it guards,
so security and the 401/403 answers are documented from the decorator that enforces them.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import wraps
from http import HTTPStatus
from typing import Any, Literal, TypeVar, cast

from flask import Flask, Response, jsonify, request
from pydantic import BaseModel, Field, ValidationError
from pydantic.json_schema import models_json_schema
from werkzeug.routing import Rule

from api.errors import ApiError

F = TypeVar("F", bound=Callable[..., Any])

OPERATION_ATTR = "__flokit_operation__"
AUTH_ATTR = "__flokit_auth__"  # set by api.auth.require_key: "read" or "write"
_REF = "#/components/schemas/{model}"

SECURITY_SCHEMES: dict[str, dict[str, Any]] = {
    "bearerAuth": {
        "type": "http",
        "scheme": "bearer",
        "description": "v1 API key (`flk_...`): read-only for GET, read-write for every POST.",
    },
    "appKey": {"type": "apiKey", "in": "header", "name": "x-app-key", "description": "App publishable key `pk_...`."},
    "ingestSecret": {"type": "apiKey", "in": "query", "name": "secret", "description": "Vendor shared secret."},
}


class V1Error(BaseModel):
    """v1 error body (ARCHITECTURE.md codes)."""

    error: str
    message: str


class GatewayError(BaseModel):
    """Gateway, passthrough and ingest error body: the production shape `{error: <message>}`."""

    error: str


@dataclass(frozen=True)
class Operation:
    summary: str
    responses: dict[int, type[BaseModel] | str | None]
    query: type[BaseModel] | None = None
    body: type[BaseModel] | None = None
    body_required: bool = True
    errors: tuple[int, ...] = ()
    security: str | None = None  # a SECURITY_SCHEMES name, for routes not guarded by require_key
    description: str | None = None
    tags: tuple[str, ...] = ()
    path_params: dict[str, dict[str, Any]] = field(default_factory=dict)


def operation(
    *,
    summary: str,
    responses: dict[int, type[BaseModel] | str | None],
    query: type[BaseModel] | None = None,
    body: type[BaseModel] | None = None,
    body_required: bool = True,
    errors: Iterable[int] = (),
    security: str | None = None,
    description: str | None = None,
    tags: Iterable[str] = (),
    path_params: dict[str, dict[str, Any]] | None = None,
) -> Callable[[F], F]:
    """Declare a route's inputs and answers; validate them on every request.

    `responses` maps a success status to a response model, a media type string (non-JSON
    bodies) or None (no body). `errors` lists the error statuses the view itself raises; 400,
    401/403 and 404 for path parameters are added where they apply.
    """
    op = Operation(
        summary=summary,
        responses=responses,
        query=query,
        body=body,
        body_required=body_required,
        errors=tuple(errors),
        security=security,
        description=description,
        tags=tuple(tags),
        path_params=path_params or {},
    )

    def decorate(view: F) -> F:
        @wraps(view)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for name, value in (request.view_args or {}).items():
                if isinstance(value, str) and "\x00" in value:
                    raise ApiError(400, f"Invalid path parameter '{name}': must not contain NUL characters")
            if op.query is not None:
                kwargs["query"] = _validate(op.query, request.args.to_dict(), "query parameter")
            if op.body is not None:
                raw = request.get_data(cache=True)
                data = request.get_json(force=True) if raw.strip() else None
                if data is None and not op.body_required:
                    data = {}
                kwargs["body"] = _validate(op.body, data, "body field")
            return view(*args, **kwargs)

        setattr(wrapper, OPERATION_ATTR, op)
        return cast(F, wrapper)

    return decorate


def _validate(model: type[BaseModel], data: Any, where: str) -> BaseModel:
    if data is None:
        raise ApiError(400, "Request body is required: send a JSON object")
    bad = _nul_at(data)
    if bad is not None:
        # PostgreSQL text cannot hold NUL; refuse it at the edge rather than fail in the database.
        raise ApiError(400, f"Invalid {where} '{bad}': must not contain NUL characters")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ApiError(400, validation_message(exc, where)) from None


def _nul_at(data: Any, path: str = "") -> str | None:
    """The dotted path of the first string (value or key) containing NUL, if any."""
    if isinstance(data, str):
        return path if "\x00" in data else None
    if isinstance(data, dict):
        for key, value in data.items():
            here = f"{path}.{key}" if path else str(key)
            if "\x00" in str(key):
                return here
            found = _nul_at(value, here)
            if found is not None:
                return found
    if isinstance(data, list):
        for i, value in enumerate(data):
            found = _nul_at(value, f"{path}.{i}" if path else str(i))
            if found is not None:
                return found
    return None


def validation_message(exc: ValidationError, where: str) -> str:
    """The first problem, naming the field: "Invalid body field 'approved_by': Field required"."""
    errors = exc.errors(include_url=False, include_input=False)
    first = errors[0]
    name = ".".join(str(part) for part in first["loc"])
    message = str(first["msg"]).removeprefix("Value error, ")
    text = f"Invalid {where} '{name}': {message}" if name else f"Invalid request body: {message}"
    if len(errors) > 1:
        text += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return text


# --- The document --------------------------------------------------------------------------


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
    """Every (rule, method) the app answers, the way a client sees it."""
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static":
            continue
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            yield rule, method


# Which surface each blueprint belongs to (passthrough is served on the gateway host).
SURFACE_OF_BLUEPRINT = {"v1": "v1", "gateway": "gateway", "passthrough": "gateway", "ingest": "ingest"}


def surface_of(rule: Rule) -> str | None:
    """The surface a route belongs to; None for routes every surface serves (/healthz, /docs)."""
    blueprint, dot, _ = rule.endpoint.partition(".")
    return SURFACE_OF_BLUEPRINT.get(blueprint) if dot else None


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

    models: list[tuple[type[BaseModel], str]] = []
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
        v1 = rule.endpoint.startswith("v1.")
        error_ref = refs[((V1Error if v1 else GatewayError), "serialization")]
        scheme = "bearerAuth" if auth else op.security
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
        errors = set(op.errors)
        if op.query is not None or op.body is not None:
            errors |= {400}
        if op.body is not None:
            errors |= {413}
        if rule.arguments:
            errors |= {404}
        if scheme == "bearerAuth":
            errors |= {401, 403} if auth == "write" else {401}
        for status in sorted(errors):
            responses[str(status)] = {
                "description": HTTPStatus(status).phrase,
                "content": {"application/json": {"schema": error_ref}},
            }
        item["responses"] = responses
        if scheme:
            used_schemes.add(scheme)
            item["security"] = [{scheme: []}]
        paths.setdefault(openapi_path(rule), {})[method.lower()] = item

    components: dict[str, Any] = {"schemas": dict(sorted(schemas.items()))}
    if used_schemes:
        components["securitySchemes"] = {name: SECURITY_SCHEMES[name] for name in sorted(used_schemes)}
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": "1", "description": description},
        "paths": dict(sorted(paths.items())),
        "components": components,
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


# --- Serving it ----------------------------------------------------------------------------


class Health(BaseModel):
    status: str


class DocQuery(BaseModel):
    surface: Literal["v1", "gateway", "ingest"] | None = Field(
        None, description="Only this surface's routes (default: every surface this process serves)."
    )


def register_openapi(app: Flask, *, surfaces: tuple[str, ...], descriptions: dict[str, str]) -> None:
    """`GET /openapi.json` (the document) and `GET /docs` (a self-contained page for people)."""
    cache: dict[str | None, dict[str, Any]] = {}

    def document(surface: str | None) -> dict[str, Any]:
        if surface is not None and surface not in surfaces:
            raise ApiError(404, f"This process does not serve the {surface} surface")
        if surface not in cache:
            chosen = (surface,) if surface else surfaces
            cache[surface] = build_document(
                app,
                title=f"FloKit API ({', '.join(chosen)})",
                description=" ".join(descriptions[s] for s in chosen),
                surface=surface,
            )
        return cache[surface]

    @app.get("/openapi.json")
    @operation(
        summary="This service's OpenAPI 3.1 document",
        query=DocQuery,
        responses={200: "application/json"},
        errors=(404,),
        tags=["meta"],
    )
    def openapi_json(query: DocQuery) -> Response:
        return jsonify(document(query.surface))

    @app.get("/docs")
    @operation(
        summary="The API reference as a web page",
        query=DocQuery,
        responses={200: "text/html"},
        errors=(404,),
        tags=["meta"],
    )
    def docs(query: DocQuery) -> Response:
        return Response(render_docs(document(query.surface), query.surface), mimetype="text/html")


def render_docs(doc: dict[str, Any], surface: str | None = None) -> str:
    """A self-contained HTML reference (no CDN, no script): operations, parameters, schemas."""
    e = html.escape
    link = "/openapi.json" + (f"?surface={surface}" if surface else "")
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{e(doc['info']['title'])}</title>",
        "<style>body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}"
        "code,pre{font:13px ui-monospace,monospace}pre{background:#f6f6f6;padding:.6rem;overflow:auto}"
        ".m{display:inline-block;min-width:4rem;font-weight:bold}h3{margin-bottom:.2rem}"
        "table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:.2rem .5rem;text-align:left}</style>",
        "</head><body>",
        f"<h1>{e(doc['info']['title'])}</h1><p>{e(doc['info']['description'])}</p>",
        f"<p>Machine-readable: <a href='{e(link)}'>{e(link)}</a> (OpenAPI 3.1).</p>",
    ]
    for path, methods in doc["paths"].items():
        for method, op in methods.items():
            parts.append(f"<h3 id='{e(op['operationId'])}'><span class='m'>{e(method.upper())}</span>")
            parts.append(f"<code>{e(path)}</code></h3><p>{e(op['summary'])}</p>")
            if op.get("description"):
                parts.append(f"<p>{e(op['description'])}</p>")
            if op.get("security"):
                parts.append(f"<p>Auth: <code>{e(', '.join(next(iter(s)) for s in op['security']))}</code></p>")
            if op.get("parameters"):
                parts.append("<table><tr><th>parameter</th><th>in</th><th>required</th><th>schema</th></tr>")
                for p in op["parameters"]:
                    required = "yes" if p["required"] else "no"
                    parts.append(
                        f"<tr><td><code>{e(p['name'])}</code></td><td>{e(p['in'])}</td><td>{required}</td>"
                        f"<td><code>{e(json.dumps(p['schema']))}</code></td></tr>"
                    )
                parts.append("</table>")
            if op.get("requestBody"):
                ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
                parts.append(f"<p>Body: <a href='#{e(_name(ref))}'>{e(_name(ref))}</a></p>")
            answers = []
            for status, answer in op["responses"].items():
                schema = next(iter(answer.get("content", {}).values()), {}).get("schema", {})
                label = _name(schema["$ref"]) if "$ref" in schema else ""
                answers.append(
                    f"{e(status)} {e(answer['description'])}"
                    + (f" (<a href='#{e(label)}'>{e(label)}</a>)" if label else "")
                )
            parts.append("<p>Responses: " + "; ".join(answers) + "</p>")
    parts.append("<h2>Schemas</h2>")
    for name, schema in doc["components"]["schemas"].items():
        parts.append(f"<h3 id='{e(name)}'>{e(name)}</h3><pre>{e(json.dumps(schema, indent=2))}</pre>")
    parts.append("</body></html>")
    return "".join(parts)


def _name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]
