"""The v1 REST API (design-partner preview): Bearer keys, `{error, message}` errors."""

from flask import Blueprint

blueprint = Blueprint("v1", __name__, url_prefix="/v1")

# Routes register themselves on the blueprint when their module is imported.
from api.v1 import (  # noqa: E402,F401
    actions,
    customers,
    events,
    experiments,
    integrations,
    reports,
    subscriptions,
    webhook_endpoints,
    webhooks,
    workspace,
)
