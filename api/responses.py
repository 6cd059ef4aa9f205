"""`respond`: the one way a route answers with a JSON body, an instance of its declared model.

    @operation(summary="...", responses={201: Created})
    def create_action(body: CreateBody) -> Response:
        ...
        return respond(Created(id=action.id, status=label), 201, headers={"Location": ...})

The body is the model's JSON dump in its declared field order, serialized as `jsonify` does. A
model that is not the one `operation` declared for that status is a bug (TypeError, a 500): the
OpenAPI document, built from the declarations, always describes what is served.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from flask import Response, current_app, g, jsonify, request
from pydantic import BaseModel

# Where `api.openapi.operation` keeps the current request's declared answers (status -> model).
DECLARED = "flokit_declared_responses"


def respond(body: BaseModel, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    declared = g.get(DECLARED)
    if declared is not None and type(body) is not declared.get(status):
        raise TypeError(
            f"{request.endpoint} answers {status} with {type(body).__name__}; "
            f"its operation declares {declared.get(status)!r}"
        )
    return json_response(body, status, headers)


def json_response(body: BaseModel, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    """The response for `body`, unchecked (error bodies: api/errors.py)."""
    if body.model_config.get("frozen"):
        # A frozen model's few values (the ingest outcomes) are serialized once per process.
        response = Response(_encoded(body), mimetype="application/json")
    else:
        response = jsonify(body.model_dump(mode="json"))
    response.status_code = status
    if headers:
        response.headers.update(headers)
    return response


@lru_cache(maxsize=64)
def _encoded(body: BaseModel) -> bytes:
    # The bytes `jsonify` writes outside debug mode: compact separators, then a newline.
    return (current_app.json.dumps(body.model_dump(mode="json"), separators=(",", ":")) + "\n").encode()
