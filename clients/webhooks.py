"""webhooks: the customer's endpoints, POSTed signed deliveries through the SSRF-safe transport.

No transport-level retries (the queue retries with backoff and records every send) and no
redirects (a 3xx is a failed delivery: following it would send the signed body somewhere the
operator never configured). The URL's form (https only unless private addresses are allowed)
is checked again before every send, and every connection resolves the host once, checks every
address and connects to a checked one (`clients.transport.PinnedAdapter`): DNS may have changed
since the endpoint was added, and a second lookup to connect could answer differently
(rebinding). The environment is not trusted: no HTTP(S)_PROXY (a proxy resolves the host itself,
out of our sight) and no .netrc credentials on requests to customer endpoints. The Dagster
resource that holds the settings is `orchestration.webhooks.resources.WebhookHttpClient`.
"""

from __future__ import annotations

from dataclasses import dataclass

import requests

from clients.dns import system_resolver
from clients.transport import AddressPolicy, PinnedAdapter
from transforms.webhooks.urls import InvalidUrl, Resolver, check_form

# The start of a receiver's answer kept with each attempt (warehouse.webhooks.deliveries.EXCERPT_CHARS).
EXCERPT_BYTES = 500
USER_AGENT = "FloKit-Webhooks/1"


@dataclass
class WebhookSender:
    """One pool of pinned connections to customer endpoints, with (connect, read) timeouts."""

    session: requests.Session
    allow_private: bool
    connect_timeout_s: float
    read_timeout_s: float

    @classmethod
    def build(
        cls,
        *,
        allow_private: bool,
        connect_timeout_s: float,
        read_timeout_s: float,
        pool_size: int,
        ca_bundle: str | None = None,
        resolver: Resolver | None = None,
    ) -> WebhookSender:
        policy = AddressPolicy(resolver=resolver or system_resolver, allow_private=allow_private)
        adapter = PinnedAdapter(policy, pool_connections=pool_size, pool_maxsize=pool_size, max_retries=0)
        session = requests.Session()
        session.trust_env = False
        session.verify = ca_bundle or True
        session.mount("https://", adapter)
        session.mount("http://", adapter)
        session.headers["User-Agent"] = USER_AGENT
        return cls(session, allow_private, connect_timeout_s, read_timeout_s)

    def close(self) -> None:
        self.session.close()

    def exchange(self, *, url: str, body: bytes, headers: dict[str, str]) -> tuple[int | None, str | None, str | None]:
        """(status code, error, the first `EXCERPT_BYTES` of the answer as text): error None for a
        2xx, `HTTP <status>` for another answer, and the reason (no status, no excerpt) when no
        answer came back."""
        try:
            check_form(url, allow_private=self.allow_private)
            response = self.session.post(
                url,
                data=body,
                headers=headers,
                timeout=(self.connect_timeout_s, self.read_timeout_s),
                allow_redirects=False,
            )
            response.close()
        except InvalidUrl as exc:  # raised by the connection too, for a non-public address
            return None, f"refused: {exc}", None
        except requests.Timeout as exc:
            return None, f"timeout: {type(exc).__name__}", None
        except requests.RequestException as exc:
            return None, f"network error: {type(exc).__name__}: {exc}", None
        # The body was read already (no streaming); decoding a slice never guesses a charset.
        excerpt = response.content[:EXCERPT_BYTES].decode("utf-8", errors="replace")
        error = None if 200 <= response.status_code < 300 else f"HTTP {response.status_code}"
        return response.status_code, error, excerpt
