"""Who is calling: the client address behind trusted proxies, and CIDR allowlist matching.

Pure functions over strings so the rules are tested without a server. The client address is
taken from the right of `X-Forwarded-For`: each trusted proxy appends the address it saw, so
with N trusted proxies the client is the Nth entry from the right (counting the socket peer as
the last one). Entries further left are written by the caller and never trusted.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def client_address(peer: str | None, forwarded_for: str | None, trusted_proxies: int) -> str | None:
    """The address of the client as seen by the outermost proxy we trust."""
    hops = [h.strip() for h in (forwarded_for or "").split(",") if h.strip()] if trusted_proxies else []
    chain = [*hops, peer or ""]
    # Never walk past the left end: a caller that bypassed a proxy gets its leftmost address.
    index = max(0, len(chain) - 1 - trusted_proxies)
    return chain[index] or None


def parse_network(cidr: str) -> IPNetwork:
    """A CIDR (`10.0.0.0/8`, `2001:db8::/32`) or a bare address (a /32 or /128)."""
    try:
        return ipaddress.ip_network(cidr.strip(), strict=False)
    except ValueError as exc:
        raise ValueError(f"not a CIDR or IP address: {cidr!r}") from exc


def address_allowed(address: str | None, cidrs: Iterable[str]) -> bool:
    """True when no allowlist is configured, or the address falls in one of its networks."""
    networks = [parse_network(c) for c in cidrs]
    if not networks:
        return True
    if not address:
        return False
    try:
        ip: IPAddress = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip.version == n.version and ip in n for n in networks)
