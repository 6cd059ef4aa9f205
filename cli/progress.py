"""Progress of a long command as it goes: one line per step with its count and duration, and a
bar for a step whose length is known, drawn only on a terminal.

Lines go through `App.progress` (stderr with --json, whose stdout holds the one JSON object);
the bar goes to the same stream and is left out when that stream is not a terminal, so logs
and pipes get the step lines only.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from cli.context import App


class Progress:
    def __init__(self, app: App) -> None:
        self.app = app
        self.started = self.mark = time.monotonic()
        self.stream = sys.stderr if app.as_json else sys.stdout
        self.bar: Any = None  # click's ProgressBar while a bar is drawn

    def begin(self, line: str) -> None:
        """A step starts (`... `): its duration is measured from here."""
        self._close_bar()
        self.app.progress(line)
        self.mark = time.monotonic()

    def done(self, line: str) -> None:
        """A step ended: the line with the seconds since the step began (or the last step ended)."""
        self._close_bar()
        now = time.monotonic()
        self.app.progress(f"{line} ({now - self.mark:.1f} s)")
        self.mark = now

    def advance(self, label: str, done: int, total: int) -> None:
        """`done` of `total` of the current step; drawn as a bar on a terminal, silent elsewhere."""
        if not self.stream.isatty():
            return
        if self.bar is None:
            self.bar = click.progressbar(length=total, label=label, file=self.stream, show_pos=True)
            self.bar.__enter__()
        self.bar.update(done - self.bar.pos)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def _close_bar(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None
