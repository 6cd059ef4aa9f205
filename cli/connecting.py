"""The one shape of a `connect` command (`flokit admin integrations connect`, `... ad-accounts
connect`): a JSON config file read, validated against the kind's declared fields, its addresses
checked under the egress policy, and the instance key that seals its secrets.

The two commands differ in what they connect and print, not in how they take a config: the
messages an operator reads on a bad file, an invalid field, a refused address or a missing key
are these, once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from cli.context import App
from clients.egress import Egress, check_config
from transforms.integrations.kinds import ConfigProblem, Field, ValidConfig
from warehouse.db import Connection

T = TypeVar("T")


def read_config(
    app: App, config_file: Path, validate: Callable[[Any], ValidConfig], fields: Iterable[Field] | None
) -> ValidConfig:
    """The file's config, validated; its addresses checked against `fields` (None: a kind that
    calls nothing, such as the sandbox). Fails the command with the reason otherwise."""
    try:
        raw = json.loads(config_file.read_text())
    except OSError as exc:
        app.fail(f"cannot read {config_file}: {exc.strerror}")
    except ValueError as exc:
        app.fail(f"{config_file} is not JSON: {exc}")
    try:
        config = validate(raw)
        if fields is not None:
            check_config(fields, config, Egress.of(app.settings.integrations_allow_private_hosts))
    except ConfigProblem as exc:
        app.fail(f"invalid config: {exc}")
    return config


def save(app: App, write: Callable[[Connection], T], refusals: tuple[type[Exception], ...]) -> T:
    """`write` in one transaction; a refusal (no such workspace, already connected, ...) fails
    the command with its message and nothing saved."""
    try:
        with app.database.write() as conn:
            return write(conn)
    except refusals as exc:
        app.fail(str(exc))
