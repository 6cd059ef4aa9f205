"""Which endpoint URLs we accept: HTTPS to public addresses (no SSRF into our own network).

With `allow_private` (FLOKIT_WEBHOOKS_ALLOW_PRIVATE=1, for development and tests) plain HTTP and
private or loopback addresses are accepted too. The sender checks the addresses again before
every send, because DNS answers can change after the endpoint was added.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit


class InvalidUrl(ValueError):
    """The URL is not acceptable as a webhook endpoint; the message says why."""


def resolve(host: str, port: int) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise InvalidUrl(f"host {host!r} does not resolve: {exc}") from exc
    return sorted({str(info[4][0]) for info in infos})


def check_public(host: str, port: int) -> None:
    """Every address the host resolves to must be globally routable."""
    for address in resolve(host, port):
        if not ipaddress.ip_address(address.split("%", 1)[0]).is_global:
            raise InvalidUrl(f"host {host!r} resolves to non-public address {address}")


def validate_url(url: str, *, allow_private: bool) -> str:
    """The URL unchanged if acceptable, else InvalidUrl."""
    if len(url) > 2048:
        raise InvalidUrl("URL longer than 2048 characters")
    parts = urlsplit(url)
    allowed = ("https", "http") if allow_private else ("https",)
    if parts.scheme not in allowed:
        raise InvalidUrl("URL must use https" + (" or http" if allow_private else ""))
    if not parts.hostname:
        raise InvalidUrl("URL has no host")
    if parts.username or parts.password:
        raise InvalidUrl("URL must not carry credentials")
    if parts.fragment:
        raise InvalidUrl("URL must not have a fragment")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise InvalidUrl(f"bad port: {exc}") from exc
    if not allow_private:
        check_public(parts.hostname, port)
    return url
