"""POST /api/paywall/token: an app-session token for one app and one user, valid 15 minutes.

Usable instead of `x-app-key` wherever the key is accepted, together with the same
`x-user-id`. Minting always needs the app's key itself (a token cannot mint tokens).
"""

from __future__ import annotations

from flask import Response
from pydantic import BaseModel, Field

from api.context import state
from api.errors import ApiError
from api.gateway import blueprint
from api.gateway.auth import require_app, require_user
from api.openapi import operation
from api.responses import respond
from transforms import app_session
from warehouse.db import utcnow


class AppSessionToken(BaseModel):
    token: str = Field(description="Opaque; send it as x-app-token with the same x-user-id.")
    token_type: str = Field(description="Always app-session.")
    expires_in: int = Field(description="Seconds of validity: 900.")


@blueprint.post("/api/paywall/token")
@operation(
    summary="Mint an app-session token",
    description="Needs the app's x-app-key (always enforced) and x-user-id; no body. The token stands in for "
    "x-app-key for 15 minutes, for this user only. 503 when this environment has no token secret.",
    responses={200: AppSessionToken},
    errors=(401, 503),
    security="appKey",
    tags=["paywall"],
)
def mint_token() -> Response:
    app = require_app(token_allowed=False)
    user = require_user()
    secret = state().settings.app_session_secret
    if not secret:
        raise ApiError(503, "Token minting is not configured in this environment")
    token, _ = app_session.mint(secret.encode(), app_id=app.id, user_id=user, now=utcnow())
    return respond(
        AppSessionToken(
            token=token, token_type=app_session.TOKEN_TYPE, expires_in=int(app_session.LIFETIME.total_seconds())
        )
    )
