"""webhooks and integrations: the operating system's name resolution, and the URL check that uses it.

The rules (which forms and which addresses are acceptable) are pure and live in
`transforms.webhooks.urls`; this module is the lookup they are given. The sender checks again at
every connection (`clients.transport`), so a check here is the operator's early answer, not the
only line of defence.
"""

from __future__ import annotations

import socket

from transforms.webhooks.urls import Resolver, check_form, public_addresses


def system_resolver(host: str, port: int) -> list[str]:
    """The operating system's answer (getaddrinfo), in its preference order, without duplicates."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def validate_url(url: str, *, allow_private: bool, resolver: Resolver = system_resolver) -> str:
    """The URL unchanged if acceptable, else InvalidUrl."""
    host, port = check_form(url, allow_private=allow_private)
    if not allow_private:
        public_addresses(host, port, resolver)
    return url
