"""`flokit admin paywalls ...`: publish paywall configurations and read the live one."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from cli.context import App, json_option, pass_app
from transforms import paywall
from transforms.timefmt import iso_z
from warehouse.errors import UnknownApp
from warehouse.paywalls import configs


def _published(p: configs.Published) -> dict[str, Any]:
    return {
        "app_id": p.app_id,
        "paywall_id": p.paywall_id,
        "version": p.version,
        "published_by": p.published_by,
        "published_at": iso_z(p.published_at),
        "document": p.document.model_dump(mode="json", exclude_none=True),
    }


@click.group()
def paywalls() -> None:
    """Paywall configurations: publish a version, show the live one."""


@paywalls.command("publish")
@click.option("--app", "app_id", required=True, help="The app (app_...).")
@click.option("--paywall", "paywall_id", required=True, help="The paywall id the app asks for.")
@click.option(
    "--file",
    "path",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help='JSON document: {"experiment_active": bool, "variants": [{variant_id, layout, offers, cta_copy, '
    "traffic_weight}]}. Use - for standard input.",
)
@click.option("--by", "actor", default="cli", show_default=True, help="Who publishes (recorded in the audit log).")
@json_option
@pass_app
def publish(app: App, app_id: str, paywall_id: str, path: Path, actor: str) -> None:
    """Validate the document and make it the paywall's live configuration (the next version)."""
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text()
        document = paywall.parse_document(json.loads(text))
    except OSError as exc:
        app.fail(f"cannot read {path}: {exc.strerror}")
    except json.JSONDecodeError as exc:
        app.fail(f"{path} is not valid JSON: {exc}")
    except paywall.InvalidDocument as exc:
        app.fail(f"invalid paywall configuration: {exc}")
    try:
        with app.database.write() as conn:
            published = configs.publish(conn, app_id=app_id, paywall_id=paywall_id, document=document, actor=actor)
    except UnknownApp:
        app.fail(f"no active app {app_id}")
    except ValueError as exc:
        app.fail(str(exc))
    app.emit(_published(published), f"published {paywall_id} version {published.version} for {app_id}")


@paywalls.command("show")
@click.option("--app", "app_id", required=True)
@click.option("--paywall", "paywall_id", required=True)
@json_option
@pass_app
def show(app: App, app_id: str, paywall_id: str) -> None:
    """The live configuration (what GET /api/paywall/config serves), or an error if none."""
    with app.database.read() as conn:
        live = configs.live(conn, app_id=app_id, paywall_id=paywall_id)
    if live is None:
        app.fail(f"no published configuration for {paywall_id} of app {app_id} (the gateway serves the fallback)")
    app.emit(_published(live), json.dumps(_published(live), indent=2))
