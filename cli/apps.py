"""`flokit admin apps stores`: who an app is in each store, so FloKit can verify its purchases.

Receipts and notifications find their app by what the store signed (the iOS bundle id, the
Android package name) or by a secret only the app's Pub/Sub push subscription knows; an app
without these answers receipts 422 ("no tenant provisioned"). The Google service account key is
sealed under the instance key; secrets made here (the push token, the generic paths' signing
secret) are printed once. Pushes authenticated by OIDC need both the push subscription's
audience and its service account (Google signs tokens for any audience for any account): the
command warns while an audience has no service account.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from cli.context import App, json_option, pass_app
from warehouse.entitlements.stores import StoresUpdate, set_stores, stores_of
from warehouse.errors import Conflict, NotFound

SERVICE_ACCOUNT_FIELDS = ("type", "client_email", "private_key", "token_uri")
PUSH_SERVICE_ACCOUNT_MISSING = (
    "app {app_id} has a push audience but no push service account: Google Play pushes with OIDC tokens are "
    "refused until you set it (--android-push-service-account, the service account of the Pub/Sub push "
    "subscription: Google Cloud console, Pub/Sub, Subscriptions, the subscription, Edit, Enable authentication)"
)


@click.group()
def apps() -> None:
    """Apps: their identities in the stores."""


def _service_account(app: App, path: Path) -> str:
    """The key file's text, once it is plainly a Google service account key."""
    try:
        text = path.read_text()
        info = json.loads(text)
    except OSError as exc:
        app.fail(f"cannot read {path}: {exc.strerror}")
    except ValueError as exc:
        app.fail(f"{path} is not JSON: {exc}")
    missing = [f for f in SERVICE_ACCOUNT_FIELDS if not isinstance(info, dict) or not info.get(f)]
    if missing:
        app.fail(f"{path} is not a service account key: missing {', '.join(missing)}")
    if info["type"] != "service_account":
        app.fail(f"{path} is a {info['type']!r} key, not a service_account key")
    return text


def _push_service_account(app: App, email: str | None) -> str | None:
    """The push subscription's service account e-mail, lower-cased (Google compares them so)."""
    if email is None:
        return None
    local, at, domain = email.partition("@")
    if not (local and at and "." in domain and len(email) <= 320) or any(c.isspace() for c in email):
        app.fail("--android-push-service-account must be an e-mail (NAME@PROJECT.iam.gserviceaccount.com)")
    return email.lower()


@apps.command("stores")
@click.option("--app", "app_id", required=True, help="The app (app_...).")
@click.option("--ios-bundle-id", help="The iOS app's bundle id, as App Store Connect shows it.")
@click.option(
    "--ios-app-apple-id", type=click.IntRange(min=1), help="The app's Apple ID (a number in App Store Connect)."
)
@click.option("--ios-environment", type=click.Choice(["Production", "Sandbox"]), help="Which App Store environment.")
@click.option("--android-package", help="The Android app's package name.")
@click.option(
    "--android-service-account",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A Google service account key (JSON) with access to the app in the Play Console.",
)
@click.option("--android-push-audience", help="The audience of the Pub/Sub push subscription's OIDC tokens.")
@click.option(
    "--android-push-service-account",
    help="The service account e-mail the Pub/Sub push subscription authenticates as (required with an audience).",
)
@click.option("--new-android-push-token", is_flag=True, help="Make a secret for the push URL (printed once).")
@click.option("--new-generic-secret", is_flag=True, help="Make the generic paths' signing secret (printed once).")
@json_option
@pass_app
def stores(
    app: App,
    app_id: str,
    ios_bundle_id: str | None,
    ios_app_apple_id: int | None,
    ios_environment: str | None,
    android_package: str | None,
    android_service_account: Path | None,
    android_push_audience: str | None,
    android_push_service_account: str | None,
    new_android_push_token: bool,
    new_generic_secret: bool,
) -> None:
    """Set (only the options given) and show the app's store identities."""
    for name, value, limit in (("--ios-bundle-id", ios_bundle_id, 155), ("--android-package", android_package, 255)):
        if value is not None and not (0 < len(value.strip()) == len(value) <= limit):
            app.fail(f"{name} must be 1 to {limit} characters without surrounding spaces")
    update = StoresUpdate(
        ios_bundle_id=ios_bundle_id,
        ios_app_apple_id=ios_app_apple_id,
        ios_environment=ios_environment,
        android_package=android_package,
        android_service_account_json=_service_account(app, android_service_account)
        if android_service_account
        else None,
        android_push_audience=android_push_audience,
        android_push_service_account=_push_service_account(app, android_push_service_account),
        new_android_push_token=new_android_push_token,
        new_generic_secret=new_generic_secret,
    )
    changing = any(v not in (None, False) for v in vars(update).values())
    try:
        if not changing:
            with app.database.read() as conn:
                found = stores_of(conn, app_id)
            if found is None:
                app.fail(f"app {app_id} has no store identities yet (set them with the options above)")
            app.emit(found.public())
            return
        with app.database.write() as conn:
            before = stores_of(conn, app_id)
            environment = ios_environment or (before.ios_environment if before else None)
            apple_id = ios_app_apple_id or (before.ios_app_apple_id if before else None)
            if environment == "Production" and apple_id is None:
                app.fail("--ios-app-apple-id is required for the Production environment (Apple checks it)")
            result = set_stores(conn, app_id=app_id, update=update, instance_key=app.instance_key())
    except NotFound:
        app.fail(f"no app {app_id}")
    except Conflict as exc:
        app.fail(str(exc))
    shown: dict[str, Any] = result.stores.public()
    if result.stores.android_push_audience and not result.stores.android_push_service_account:
        click.echo(f"warning: {PUSH_SERVICE_ACCOUNT_MISSING.format(app_id=app_id)}", err=True)
    if result.android_push_token:
        shown["android_push_token"] = result.android_push_token
        shown["android_push_path"] = f"/webhooks/android_store?token={result.android_push_token}"
    if result.generic_secret:
        shown["generic_secret"] = result.generic_secret
        shown["generic_paths"] = [
            f"/api/providers/generic-subscription/webhook?app={app_id}",
            f"/api/integrations/mmp/generic-attribution?app={app_id}",
        ]
    app.emit(shown)
