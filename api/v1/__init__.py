"""The v1 REST API (design-partner preview): Bearer keys, `{error, message}` errors."""

from flask import Blueprint

blueprint = Blueprint("v1", __name__, url_prefix="/v1")

# Routes register themselves on the blueprint when imported.
from api.v1 import reports, workspace  # noqa: E402,F401
