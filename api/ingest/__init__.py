"""The measurement ingest gateway: attribution callbacks in, canonical events landed."""

from flask import Blueprint
from flask.blueprints import BlueprintSetupState

from api.context import EXTENSION
from warehouse import fx

blueprint = Blueprint("ingest", __name__)


@blueprint.record_once
def _load_rates(setup: BlueprintSetupState) -> None:
    """Read the ECB rates when the app is built, not on its first callback (a third of a second)."""
    fx.latest_rates(setup.app.extensions[EXTENSION].settings.paths)


from api.ingest import callbacks, push  # noqa: E402,F401  (routes register themselves on the blueprint)
