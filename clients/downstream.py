"""passthrough: HTTP to the operator's services behind the gateway (provider webhook downstream, receipt verifier).

Not a vendor's API but the operator's own server, called the same way: one pool per thread, no
environment proxy or .netrc between the gateway and it.
"""

from __future__ import annotations

import threading

import requests

_local = threading.local()


def session() -> requests.Session:
    """One connection pool per thread, so calls reuse connections to the downstream."""
    found = getattr(_local, "session", None)
    if found is None:
        found = _local.session = requests.Session()
        found.trust_env = False  # no proxy or netrc from the environment between us and the downstream
    return found
