"""The paywall and entitlement gateway (live in production): `{error: <message>}` errors."""

from flask import Blueprint

blueprint = Blueprint("gateway", __name__)

from api.gateway import config, entitlements, events, token, trusted  # noqa: E402,F401  (routes register themselves on the blueprint)
