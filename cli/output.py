"""Printing results: one JSON object with --json, readable lines otherwise."""

from __future__ import annotations

import json
from typing import Any, NoReturn

import click


def emit(result: dict[str, Any], as_json: bool, human: str | None = None) -> None:
    if as_json:
        click.echo(json.dumps(result, default=str))
    else:
        click.echo(human if human is not None else "\n".join(f"{k}: {v}" for k, v in result.items()))


def fail(message: str, as_json: bool = False, code: int = 1) -> NoReturn:
    if as_json:
        click.echo(json.dumps({"error": message}), err=True)
    else:
        click.echo(f"error: {message}", err=True)
    raise SystemExit(code)
