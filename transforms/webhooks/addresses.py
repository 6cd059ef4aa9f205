"""Which IP addresses a webhook may be sent to: globally routable unicast, nothing of our own network.

Pure (no I/O): the sender resolves a host once, asks `refusal` about every address, and connects
only to addresses that passed. Python's `ipaddress.is_global` is the base, but Python 3.11's
tables call several forms "global" that reach private space, so they are handled here first:

- IPv6 forms that carry an IPv4 address to which the packet is delivered are judged by that
  IPv4 address: IPv4-mapped `::ffff:a.b.c.d` (the socket connects to the IPv4 address), NAT64
  `64:ff9b::/96` (the gateway forwards to the embedded address) and 6to4 `2002:AABB:CCDD::/48`
  (a relay decapsulates to AA.BB.CC.DD). A public embedded address is allowed: traffic goes to
  whoever owns that public IPv4 address, which no attacker can point into our network.
- Deprecated or local-only ranges are refused outright: IPv4-compatible `::a.b.c.d` (RFC 4291),
  site-local `fec0::/10` (RFC 3879), local-use NAT64 `64:ff9b:1::/48` (RFC 8215, network-specific
  and never global), Teredo `2001::/32` (RFC 4380: a tunnel to a host behind a NAT through relays,
  no place for a webhook receiver; its embedded addresses are obfuscated).
- Native IPv6 must be global unicast (`2000::/3`, the only space IANA allocates from), which
  excludes ULA, link-local, multicast and the discard prefix whatever Python's tables say, and
  outside the `2001:db8::/32` and `3fff::/20` documentation ranges.
- IPv4 must be `is_global` and not multicast (3.11 calls 224.0.0.0/4 global) and outside
  192.0.0.0/24 (IETF protocol assignments; 3.11 lists only parts of it).
"""

from __future__ import annotations

import ipaddress
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

_IPV4_PROTOCOL_ASSIGNMENTS = IPv4Network("192.0.0.0/24")

_NAT64_WELL_KNOWN = IPv6Network("64:ff9b::/96")
_NAT64_LOCAL_USE = IPv6Network("64:ff9b:1::/48")
_TEREDO = IPv6Network("2001::/32")
_IPV4_COMPATIBLE = IPv6Network("::/96")
_SITE_LOCAL = IPv6Network("fec0::/10")
_GLOBAL_UNICAST = IPv6Network("2000::/3")
_DOCUMENTATION_V6 = (IPv6Network("2001:db8::/32"), IPv6Network("3fff::/20"))


def refusal(address: str) -> str | None:
    """None if a webhook may be sent to `address` (an IP literal), else why not, for the error."""
    if "%" in address:
        return "scoped (link-local) address"
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return "not an IP address"
    if isinstance(ip, IPv4Address):
        return _ipv4_refusal(ip)
    return _ipv6_refusal(ip)


def _ipv4_refusal(ip: IPv4Address) -> str | None:
    if ip.is_multicast:
        return "multicast"
    if ip in _IPV4_PROTOCOL_ASSIGNMENTS or not ip.is_global:
        return "not globally routable"
    return None


def _embedded(form: str, ipv4: IPv4Address) -> str | None:
    reason = _ipv4_refusal(ipv4)
    return None if reason is None else f"{form} form of {ipv4}, {reason}"


def _ipv6_refusal(ip: IPv6Address) -> str | None:
    if ip.ipv4_mapped is not None:
        return _embedded("IPv4-mapped", ip.ipv4_mapped)
    if ip in _NAT64_WELL_KNOWN:
        return _embedded("NAT64", IPv4Address(int(ip) & 0xFFFFFFFF))
    if ip.sixtofour is not None:  # 2002::/16
        return _embedded("6to4", ip.sixtofour)
    if ip in _NAT64_LOCAL_USE:
        return "local-use NAT64 prefix 64:ff9b:1::/48"
    if ip in _TEREDO:
        return "Teredo tunnel address (2001::/32)"
    if ip in _IPV4_COMPATIBLE:  # also :: and ::1
        return "not globally routable" if int(ip) <= 1 else "deprecated IPv4-compatible address (::/96)"
    if ip in _SITE_LOCAL:
        return "deprecated site-local address (fec0::/10)"
    if ip not in _GLOBAL_UNICAST:
        return "outside global unicast 2000::/3"
    if any(ip in net for net in _DOCUMENTATION_V6):
        return "documentation range"
    if not ip.is_global:
        return "not globally routable"
    return None
