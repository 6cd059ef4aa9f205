"""The paywall and entitlement gateway (live in production): `{error: <message>}` errors."""

from flask import Blueprint

blueprint = Blueprint("gateway", __name__)
