"""`flokit` run in-process through click's CliRunner, answered as a process would answer.

A `flokit` subprocess pays 3-4 s of imports (click, SQLAlchemy, Polars, the API's schemas) before
it does anything; a test that runs twenty of them spends a minute importing. `flokit_in_process`
runs the same command object (`cli.main.main`) with the same arguments and environment and answers
what the process would: its exit status, its stdout, its stderr. It is for tests whose point is a
command's behaviour. Tests whose point is the process itself (signals, the supervisor, `flokit up`,
a refresh killed mid-run, the installed entry point) keep running the real binary.

What a process would leave behind when it exits, this undoes: the environment (`flokit refresh`
exports its settings for Dagster), `warnings.showwarning` (it sends warnings to a log file), and
the database engines the command opened (a process's connections close when it exits). The command
runs in a thread of its own, which has no running event loop, as the process had none: in a test
that drives Chromium, Playwright's sync API leaves its loop marked running in the test's thread,
and Dagster's `execute_in_process` (`flokit refresh`) then cannot shut its own loop down (its
`shutdown_asyncgens` coroutine is left unawaited, a warning pytest turns into an error).
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from click.testing import CliRunner

from cli.main import main
from warehouse.db import close_database, open_database_urls
from warehouse.settings import Settings


@dataclass(frozen=True)
class Ran:
    """What a finished `flokit` answered: the fields of `subprocess.CompletedProcess` tests read."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str


def flokit_in_process(env: Mapping[str, str], *args: str, input: str | None = None) -> Ran:
    """Run `flokit *args` in this process with exactly `env` as its environment (a variable of this
    process missing from `env` is unset for the command, as in a child started with `env=`)."""
    saved_env, saved_show = dict(os.environ), warnings.showwarning
    opened_before = open_database_urls()
    overrides: dict[str, str | None] = {k: v for k, v in env.items() if os.environ.get(k) != v}
    overrides |= {k: None for k in os.environ if k not in env}
    try:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="flokit") as thread:
            result = thread.submit(
                CliRunner().invoke,
                main,
                list(args),
                env=overrides,
                input=input,
                catch_exceptions=False,
                prog_name="flokit",
            ).result()
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        warnings.showwarning = saved_show
        for url in open_database_urls() - opened_before:
            close_database(url)
    stdout, stderr = result.stdout, result.stderr
    code = getattr(result.exception, "code", None)
    if isinstance(result.exception, SystemExit) and code is not None and not isinstance(code, int):
        # `raise SystemExit("message")`: Python prints the message on stderr and exits 1; CliRunner
        # writes it to stdout instead.
        message = f"{code}\n"
        if stdout.endswith(message):
            stdout = stdout[: -len(message)]
        stderr += message
    return Ran(["flokit", *args], result.exit_code, stdout, stderr)


def run(settings: Settings, *args: str, ok: bool = True) -> Ran:
    result = flokit_in_process({**os.environ, **settings.child_env()}, *args)
    if ok:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


def run_json(settings: Settings, *args: str) -> dict:
    return json.loads(run(settings, *args, "--json").stdout)
