"""android_store: Google Play Developer API (androidpublisher v3), the client both callers build.

Receipts and notifications (`api.stores.google_play`) and the sync
(`orchestration.syncs.connectors.android_store`) read purchases through this service; what a
purchase resource means is `transforms.stores.google_play`, which stays pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import google_auth_httplib2  # type: ignore[import-untyped]  # no type information shipped
import httplib2  # type: ignore[import-untyped]
from google.oauth2 import service_account
from googleapiclient import discovery  # type: ignore[import-untyped]

SCOPE = "https://www.googleapis.com/auth/androidpublisher"


def service_for(info: Mapping[str, Any], *, api_url: str, timeout: float) -> tuple[service_account.Credentials, Any]:
    """The app's service-account credentials and the androidpublisher v3 service built on them.

    Construction only (the discovery document ships with google-api-python-client, so nothing
    is fetched; the OAuth token is requested on the first call). Each call should then run on
    its own `AuthorizedHttp` (`authorized_http`): httplib2 objects are not thread-safe. A key
    file that is not a usable service-account key raises `ValueError`."""
    try:
        credentials = service_account.Credentials.from_service_account_info(dict(info), scopes=[SCOPE])
    except KeyError as e:
        raise ValueError(f"the key file lacks {e}") from None
    service = discovery.build(
        "androidpublisher",
        "v3",
        http=authorized_http(credentials, timeout),
        client_options={"api_endpoint": api_url},
        static_discovery=True,
        cache_discovery=False,
    )
    return credentials, service


def authorized_http(credentials: service_account.Credentials, timeout: float) -> Any:
    """A fresh authorized transport for one call, `timeout` seconds on its socket."""
    return google_auth_httplib2.AuthorizedHttp(credentials, http=httplib2.Http(timeout=timeout))
