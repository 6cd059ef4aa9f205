"""FloKit's own processor of provider notifications (the passthrough's downstream).

Deployed alone (`FLOKIT_SURFACES=processor`) it serves the seven provider paths itself, so a
gateway elsewhere can forward to it (`FLOKIT_PASSTHROUGH_URL`); beside the gateway, the gateway
hands it each request in-process, with the same bytes and headers.
"""

from flask import Blueprint

blueprint = Blueprint("processor", __name__)

from api.notifications import routes  # noqa: E402,F401  (routes register themselves on the blueprint)
