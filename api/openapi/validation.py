"""`operation`: declare a route's inputs and answers; validate the inputs on every request."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import wraps
from typing import Any, TypeVar, cast

from flask import g, request
from pydantic import BaseModel, ValidationError

from api.errors import ApiError
from api.responses import DECLARED

F = TypeVar("F", bound=Callable[..., Any])

OPERATION_ATTR = "__flokit_operation__"
AUTH_ATTR = "__flokit_auth__"  # set by api.auth.require_key: "read" or "write"


@dataclass(frozen=True)
class Operation:
    summary: str
    responses: dict[int, type[BaseModel] | str | None]
    query: type[BaseModel] | None = None
    # False: the query model only documents the parameters; the view reads them itself (ingest
    # callbacks are never refused for a bad parameter: normalization drops or ignores it).
    validate_query: bool = True
    body: type[BaseModel] | None = None
    body_required: bool = True
    errors: tuple[int, ...] = ()
    security: str | None = None  # a SECURITY_SCHEMES name, for routes not guarded by require_key
    description: str | None = None
    tags: tuple[str, ...] = ()
    path_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The route reads or writes the operational database, so it answers 503 with Retry-After
    # while the database is unavailable (warehouse/availability.py).
    database: bool = True
    # Request headers the route reads beyond authentication (name -> description), and headers
    # its success answers may carry (name -> description): documented, not validated here.
    headers: dict[str, str] = field(default_factory=dict)
    response_headers: dict[str, str] = field(default_factory=dict)


def operation(
    *,
    summary: str,
    responses: dict[int, type[BaseModel] | str | None],
    query: type[BaseModel] | None = None,
    validate_query: bool = True,
    body: type[BaseModel] | None = None,
    body_required: bool = True,
    errors: Iterable[int] = (),
    security: str | None = None,
    description: str | None = None,
    tags: Iterable[str] = (),
    path_params: dict[str, dict[str, Any]] | None = None,
    database: bool = True,
    headers: dict[str, str] | None = None,
    response_headers: dict[str, str] | None = None,
) -> Callable[[F], F]:
    """Declare a route's inputs and answers; validate them on every request.

    `responses` maps a success status to a response model, a media type string (non-JSON
    bodies) or None (no body). `errors` lists the error statuses the view itself raises; 400,
    401/403 and 404 for path parameters are added where they apply, and 503 unless the route
    never touches the database (`database=False`).
    """
    op = Operation(
        summary=summary,
        responses=responses,
        query=query,
        validate_query=validate_query,
        body=body,
        body_required=body_required,
        errors=tuple(errors),
        security=security,
        description=description,
        tags=tuple(tags),
        path_params=path_params or {},
        database=database,
        headers=headers or {},
        response_headers=response_headers or {},
    )

    def decorate(view: F) -> F:
        @wraps(view)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            setattr(g, DECLARED, op.responses)  # what `api.responses.respond` may answer
            for name, value in (request.view_args or {}).items():
                if isinstance(value, str) and "\x00" in value:
                    raise ApiError(400, f"Invalid path parameter '{name}': must not contain NUL characters")
            if op.query is not None and op.validate_query:
                kwargs["query"] = _validate(op.query, request.args.to_dict(), "query parameter")
            if op.body is not None:
                raw = request.get_data(cache=True)
                # get_json refuses JSON nested past MAX_JSON_DEPTH before parsing it (api/limits.py),
                # so nothing here walks an unbounded depth.
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


def _nul_at(data: Any) -> str | None:
    """The dotted path of the first string (value or key) containing NUL, if any.

    Iterative, depth first in document order: a stack of the containers being walked and the
    keys that lead to them. The path is built only for the NUL found (a path string per level
    cost the 971 KB body of long keys nested 900 deep 426 MiB)."""
    if isinstance(data, str):
        return "" if "\x00" in data else None
    if not isinstance(data, (dict, list)):
        return None
    keys: list[Any] = []  # keys[i]: the key of stack[i + 1] within stack[i]
    stack: list[Iterator[tuple[Any, Any]]] = [_items(data)]
    while stack:
        for key, value in stack[-1]:
            if isinstance(key, str) and "\x00" in key:
                return _path(keys, key)
            if isinstance(value, str):
                if "\x00" in value:
                    return _path(keys, key)
            elif isinstance(value, (dict, list)):
                keys.append(key)
                stack.append(_items(value))
                break
        else:
            stack.pop()
            if keys:
                keys.pop()
    return None


def _items(container: dict[Any, Any] | list[Any]) -> Iterator[tuple[Any, Any]]:
    return iter(container.items()) if isinstance(container, dict) else enumerate(container)


def _path(keys: list[Any], last: Any) -> str:
    return ".".join(str(key) for key in [*keys, last])


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
