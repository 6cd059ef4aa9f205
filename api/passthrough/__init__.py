"""Provider webhook passthrough (gateway host): raw bodies forwarded downstream."""

from flask import Blueprint

blueprint = Blueprint("passthrough", __name__)

from api.passthrough import forward  # noqa: E402,F401  (routes register themselves on the blueprint)
