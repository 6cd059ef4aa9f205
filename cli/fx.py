"""`flokit fx ...`: the ECB reference rates the reports convert amounts with."""

from __future__ import annotations

import click
import requests

from cli.context import App, json_option, pass_app
from clients import ecb
from warehouse import fx as rates
from warehouse.db import utcnow
from warehouse.objects import StoreUnavailable


@click.group()
def fx() -> None:
    """Exchange rates: the ECB daily reference rates every amount is converted with."""


@fx.command("refresh")
@click.option("--url", default=ecb.ECB_URL, show_default=True, help="Where to download eurofxref-hist.zip from.")
@json_option
@pass_app
def refresh(app: App, url: str) -> None:
    """Download the ECB rates history into the data directory (atomically); it replaces the bundled copy.

    Days after the newest rate use that rate until the next refresh; re-run the report refresh
    for those days to convert them at their own rates."""
    try:
        found = rates.install(app.settings.paths, ecb.download(url))
    except (requests.RequestException, ecb.TooLarge, rates.InvalidRatesFile, StoreUnavailable) as exc:
        app.fail(f"rates not refreshed ({exc}); the previous rates stay in use")
    app.emit(
        {
            "path": str(found.path),
            "first_day": found.first_day.isoformat(),
            "last_day": found.last_day.isoformat(),
            "currencies": list(found.currencies),
        },
        f"ECB rates {found.first_day} .. {found.last_day}, {len(found.currencies)} currencies, in {found.path}",
    )


@fx.command("show")
@json_option
@pass_app
def show(app: App) -> None:
    """Which rates file is in use, the days it covers and how old its newest rate is."""
    found = rates.info(app.settings.paths)
    age = (utcnow().date() - found.last_day).days
    app.emit(
        {
            "path": str(found.path),
            "first_day": found.first_day.isoformat(),
            "last_day": found.last_day.isoformat(),
            "age_days": age,
            "currencies": list(found.currencies),
        },
        f"ECB rates {found.first_day} .. {found.last_day}, {len(found.currencies)} currencies, from {found.path}\n"
        f"newest rate {age} days old; days after it are converted at it until `flokit fx refresh`",
    )
