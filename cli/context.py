"""What every `flokit` command gets: one `App` per invocation on the click context.

The settings are loaded, and the database opened, the first time a command asks for them, so
`--help` and the commands that need no database (`flokit dagster check`) never open one, and a
configuration error is reported by the command that needed the configuration. `--json` is one
option (`json_option`) that sets `App.as_json`; `App.emit` and `App.fail` print accordingly.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Concatenate, NoReturn, ParamSpec, TypeVar

import click

from warehouse.db import Database, database_for
from warehouse.settings import DATA_DIR_MODE, Settings, SettingsError

NO_INSTANCE_KEY = "no instance key: run `flokit db upgrade` (it creates one) or set FLOKIT_SECRET_KEY"

P = ParamSpec("P")
R = TypeVar("R")


@dataclass
class App:
    as_json: bool = False
    _settings: Settings | None = field(default=None, repr=False)
    _database: Database | None = field(default=None, repr=False)

    @property
    def settings(self) -> Settings:
        """The settings from the environment, validated once; a configuration error ends the command."""
        if self._settings is None:
            try:
                self._settings = Settings.from_env()
            except SettingsError as exc:
                raise SystemExit(f"flokit: configuration error: {exc}") from exc
        return self._settings

    @property
    def database(self) -> Database:
        """The operational database, opened once (the data directory is created owner-only first)."""
        if self._database is None:
            settings = self.settings
            settings.data_dir.mkdir(mode=DATA_DIR_MODE, parents=True, exist_ok=True)
            self._database = database_for(settings.database_url)
        return self._database

    def instance_key(self) -> str:
        """The key that seals secrets (integration credentials, signing secrets, store keys); the
        command fails when the instance has none yet."""
        key = self.settings.instance_key
        if key is None:
            self.fail(NO_INSTANCE_KEY)
        return key

    def close(self) -> None:
        """Dispose of the database's connections (before forking children, and at the end)."""
        if self._database is not None:
            self._database.dispose()
            self._database = None

    def emit(self, result: dict[str, Any], human: str | None = None) -> None:
        """The command's result: one JSON object on stdout with --json, readable lines otherwise."""
        if self.as_json:
            click.echo(json.dumps(result, default=str))
        else:
            click.echo(human if human is not None else "\n".join(f"{k}: {v}" for k, v in result.items()))

    def fail(self, message: str, code: int = 1) -> NoReturn:
        """The command's refusal on stderr (`{"error": ...}` with --json), exit status `code`."""
        if self.as_json:
            click.echo(json.dumps({"error": message}), err=True)
        else:
            click.echo(f"error: {message}", err=True)
        raise SystemExit(code)

    def progress(self, line: str) -> None:
        """A progress line: on stderr with --json (stdout holds the one JSON object), stdout otherwise."""
        click.echo(line, err=self.as_json)


def current_app() -> App:
    """The invocation's App, created on the outermost context (and closed with it) when missing."""
    ctx = click.get_current_context()
    app = ctx.find_object(App)
    if app is None:
        root = ctx.find_root()
        app = root.ensure_object(App)
        root.call_on_close(app.close)
    return app


def pass_app(command: Callable[Concatenate[App, P], R]) -> Callable[P, R]:
    """Give a command the invocation's App as its first argument."""

    @functools.wraps(command)
    def with_app(*args: P.args, **kwargs: P.kwargs) -> R:
        return command(current_app(), *args, **kwargs)

    return with_app


def _set_json(_ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    if value:
        current_app().as_json = True
    return value


# The one `--json` flag of every command that prints a result.
json_option = click.option(
    "--json",
    "as_json",
    is_flag=True,
    expose_value=False,
    is_eager=True,  # set before the other options' callbacks can fail, so their errors are JSON too
    callback=_set_json,
    help="Print one JSON object on stdout (progress and errors go to stderr).",
)
