"""Serving the document: `GET /openapi.json` and a self-contained `GET /docs` page."""

from __future__ import annotations

import html
import json
from typing import Any, Literal

from flask import Flask, Response, jsonify
from pydantic import BaseModel, Field

from api.errors import ApiError
from api.openapi.document import build_document
from api.openapi.validation import operation


class Health(BaseModel):
    status: str


class NotReady(BaseModel):
    """GET /readyz when the operational database does not answer (503, with Retry-After)."""

    status: Literal["unavailable"]
    reason: str = Field(
        description="What failed: connection, shutdown, starting_or_stopping, resources, pool_exhausted, "
        "locked, io_error, disk_full, cannot_open, or error (anything else); or `reports: <why>` when the "
        "published reports cannot be fetched from the object store and this host holds no copy."
    )


class DocQuery(BaseModel):
    surface: Literal["v1", "gateway", "ingest", "processor"] | None = Field(
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
        database=False,
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
        database=False,
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
                media: list[dict[str, Any]] = list(answer.get("content", {}).values())
                schema: dict[str, Any] = media[0].get("schema", {}) if media else {}
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
