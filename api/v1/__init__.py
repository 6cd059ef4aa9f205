"""The v1 REST API (design-partner preview): Bearer keys, `{error, message}` errors."""

from flask import Blueprint

blueprint = Blueprint("v1", __name__, url_prefix="/v1")

from api.v1 import workspace  # noqa: E402,F401  (routes register themselves on the blueprint)
