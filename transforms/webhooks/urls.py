"""Which endpoint URLs we accept: HTTPS to public addresses (no SSRF into our own network).

Pure: the lookup itself is the caller's `Resolver` (`clients.dns.system_resolver` in production,
a table in tests), so warehouse and transforms stay off the network.

With `allow_private` (FLOKIT_WEBHOOKS_ALLOW_PRIVATE=1, for development and tests) plain HTTP and
private or loopback addresses are accepted too. Adding an endpoint checks its URL here; the
sender checks the form again before every send and, for every new connection, resolves the host
once, checks every address (`public_addresses`) and connects only to those: resolving again to
connect would let a name that rebinds (public when checked, internal when connected) through.
Which addresses count as public is `transforms.webhooks.addresses.refusal`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping, Sequence
from urllib.parse import urlsplit

from transforms.webhooks.addresses import refusal

# (host, port) -> the host's IP addresses in the order to try them; raises OSError if it has none.
Resolver = Callable[[str, int], Sequence[str]]


class InvalidUrl(ValueError):
    """The URL is not acceptable as a webhook endpoint; the message says why."""


class DoesNotResolve(InvalidUrl):
    """The host has no address (now): refused when adding an endpoint, a network error when sending."""


def resolve(host: str, port: int, resolver: Resolver) -> list[str]:
    """The host's addresses from one lookup; DoesNotResolve if there are none."""
    try:
        addresses = list(resolver(host.strip("[]"), port))
    except (OSError, UnicodeError) as exc:
        raise DoesNotResolve(f"host {host!r} does not resolve: {exc}") from exc
    if not addresses:
        raise DoesNotResolve(f"host {host!r} does not resolve: no addresses")
    return addresses


def public_addresses(host: str, port: int, resolver: Resolver) -> list[str]:
    """The host's addresses from one lookup, if every one of them is public; else InvalidUrl.

    Every address, not just the first: the connection may fall back to any of them.
    """
    addresses = resolve(host, port, resolver)
    for address in addresses:
        reason = refusal(address)
        if reason is not None:
            raise InvalidUrl(f"host {host!r} resolves to non-public address {address} ({reason})")
    return addresses


def check_form(url: str, *, allow_private: bool) -> tuple[str, int]:
    """(host, port) of an acceptable URL, checking everything but the addresses; else InvalidUrl.

    The sender calls this before every send too: https only unless private addresses are allowed.
    """
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
    return parts.hostname, port


# The hosts an operator allows integrations and ad accounts to reach on a private network (or over
# plain http): `clients.egress.Egress.from_env` in a run process, `Settings` everywhere else.
INTEGRATIONS_PRIVATE_HOSTS_ENV = "FLOKIT_INTEGRATIONS_ALLOW_PRIVATE_HOSTS"


def private_hosts(env: Mapping[str, str], name: str = INTEGRATIONS_PRIVATE_HOSTS_ENV) -> tuple[str, ...]:
    """Comma-separated host names (or IP literals) as written in URLs, lowercased, without a final dot."""
    hosts = tuple(dict.fromkeys(h.strip().lower().rstrip(".").strip("[]") for h in env.get(name, "").split(",")))
    hosts = tuple(h for h in hosts if h)
    bad = [h for h in hosts if any(c in h for c in "/:@ ") and not _is_ipv6(h)]
    if bad:
        raise ValueError(f"{name} must list host names or IP addresses (no scheme, port or path), got {bad[0]!r}")
    return hosts


def _is_ipv6(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).version == 6
    except ValueError:
        return False
