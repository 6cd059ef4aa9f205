"""Provider webhook passthrough (gateway host): raw bodies forwarded downstream."""

from flask import Blueprint

blueprint = Blueprint("passthrough", __name__)
