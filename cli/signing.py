"""`flokit admin signing-keys ...`: the keys that sign entitlement answers (issue 36 part 1)."""

from __future__ import annotations

import base64

import click

from cli.context import App, json_option, pass_app
from transforms.timefmt import iso_z
from warehouse.signing import keys


@click.group("signing-keys")
def signing_keys() -> None:
    """The root key apps pin, and the short-lived intermediate keys it certifies."""


@signing_keys.command("show")
@json_option
@pass_app
def show(app: App) -> None:
    """The root public key (standard base64) and its kid, for the app to pin; the current intermediate."""
    with app.database.read() as conn:
        root = keys.root(conn)
        latest = keys.latest_generation(conn)
    if root is None:
        app.fail("no root signing key yet: run `flokit db upgrade`")
    public = base64.b64encode(root.public_key).decode()
    app.emit(
        {"root_public_key": public, "root_kid": root.kid, "intermediate_generation": latest},
        f"root public key (pin this in the app): {public}\nroot kid: {root.kid}",
    )


@signing_keys.command("rotate")
@json_option
@pass_app
def rotate(app: App) -> None:
    """A new intermediate signs from now on (every API process within seconds); the previous one
    stays published until it expires, so answers it signed keep verifying. The root is unchanged."""
    instance_key = app.instance_key()
    try:
        with app.database.write() as conn:
            signer = keys.rotate(conn, instance_key=instance_key)
    except keys.SigningKeysMissing as exc:
        app.fail(str(exc))
    app.emit(
        {"kid": signer.kid, "generation": signer.generation, "expires_at": iso_z(signer.expires_at)},
        f"intermediate {signer.kid} (generation {signer.generation}) signs until {iso_z(signer.expires_at)}",
    )
