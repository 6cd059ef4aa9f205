"""Which addresses a webhook may go to, for every IPv6 form that can carry a private IPv4 address.

Python 3.11's `is_global` calls NAT64, 6to4, IPv4-compatible, site-local and multicast addresses
"global"; these tables pin down what we decide instead (see transforms/webhooks/addresses.py).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

import pytest

from transforms.webhooks.addresses import refusal

# IPv4 addresses that must never be reached, whatever IPv6 form carries them.
NON_PUBLIC_V4 = [
    "127.0.0.1",  # loopback
    "10.1.2.3",
    "172.16.0.1",
    "192.168.1.1",
    "169.254.169.254",  # cloud metadata (link-local)
    "100.64.0.1",  # carrier-grade NAT
    "0.0.0.0",  # noqa: S104 - connects to this host on Linux
    "192.0.0.8",  # IETF protocol assignments (3.11 calls it global)
    "192.0.2.1",  # documentation
    "198.18.0.1",  # benchmarking
    "224.0.0.1",  # multicast (3.11 calls it global)
    "240.0.0.1",  # reserved
    "255.255.255.255",
]
PUBLIC_V4 = ["8.8.8.8", "1.1.1.1", "93.184.215.14"]


def mapped(v4: str) -> str:
    return f"::ffff:{v4}"


def nat64(v4: str) -> str:
    return f"64:ff9b::{v4}"


def nat64_local(v4: str) -> str:
    return f"64:ff9b:1::{v4}"


def compatible(v4: str) -> str:
    return f"::{v4}"


def sixtofour(v4: str) -> str:
    return str(ipaddress.IPv6Address((0x2002 << 112) | (int(ipaddress.IPv4Address(v4)) << 80) | 1))


def teredo(server: str, client: str) -> str:
    """RFC 4380: 2001:0:server:flags:~port:~client."""
    bits = (0x20010000 << 96) | (int(ipaddress.IPv4Address(server)) << 64) | (0xFFFF ^ 443) << 32
    return str(ipaddress.IPv6Address(bits | (0xFFFFFFFF ^ int(ipaddress.IPv4Address(client)))))


# Forms that deliver to the embedded IPv4 address: judged by it.
JUDGED_BY_EMBEDDED: list[Callable[[str], str]] = [mapped, nat64, sixtofour]
# Deprecated or local-only forms: refused whatever they carry.
ALWAYS_REFUSED: list[Callable[[str], str]] = [compatible, nat64_local, lambda v4: teredo("65.54.227.120", v4)]


@pytest.mark.parametrize(
    "address",
    [
        "8.8.8.8",
        "2001:4860:4860::8888",
        "2606:4700:4700::1111",
        "::ffff:8.8.8.8",
        "::ffff:808:808",
        "64:ff9b::8.8.8.8",
        "64:ff9b::808:808",
        "2002:0808:0808::1",  # 6to4 of 8.8.8.8: allowed, traffic goes to whoever holds 8.8.8.8
        "2002:808:808:1:2:3:4:5",
    ],
)
def test_public_addresses_are_allowed(address: str) -> None:
    assert refusal(address) is None


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "not globally routable"),
        ("169.254.169.254", "not globally routable"),
        ("239.1.2.3", "multicast"),
        ("::ffff:127.0.0.1", "IPv4-mapped form of 127.0.0.1"),
        ("::ffff:a9fe:a9fe", "IPv4-mapped form of 169.254.169.254"),
        ("64:ff9b::7f00:1", "NAT64 form of 127.0.0.1"),
        ("64:ff9b::169.254.169.254", "NAT64 form of 169.254.169.254"),
        ("64:ff9b::a00:1", "NAT64 form of 10.0.0.1"),
        ("2002:7f00:1::1", "6to4 form of 127.0.0.1"),
        ("2002:a9fe:a9fe::", "6to4 form of 169.254.169.254"),
        ("2002:c0a8:101::1", "6to4 form of 192.168.1.1"),
        ("::127.0.0.1", "IPv4-compatible"),
        ("::8.8.8.8", "IPv4-compatible"),  # deprecated even when public
        ("64:ff9b:1::808:808", "local-use NAT64"),
        ("64:ff9b:1::7f00:1", "local-use NAT64"),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"),  # RFC 4380's example
        ("2001::1", "Teredo"),
        ("fec0::1", "site-local"),
        ("fed0:1:2::3", "site-local"),
        ("::1", "not globally routable"),
        ("::", "not globally routable"),
        ("fe80::1", "outside global unicast"),
        ("fe80::1%lo", "scoped"),
        ("fc00::1", "outside global unicast"),
        ("fd12:3456:789a::1", "outside global unicast"),
        ("ff02::1", "outside global unicast"),
        ("ff0e::1", "outside global unicast"),  # global-scope multicast: 3.11 calls it global
        ("100::1", "outside global unicast"),  # discard prefix
        ("5f00::1", "outside global unicast"),  # SRv6 SIDs
        ("::ffff:0:7f00:1", "outside global unicast"),  # IPv4-translated (SIIT)
        ("2001:db8::1", "documentation"),
        ("3fff::1", "documentation"),  # RFC 9637, newer than 3.11's tables
        ("2001:10::1", "not globally routable"),  # ORCHID
        ("example.com", "not an IP address"),
    ],
)
def test_non_public_addresses_are_refused_with_the_reason(address: str, reason: str) -> None:
    refused = refusal(address)
    assert refused is not None and reason in refused


@pytest.mark.parametrize("v4", NON_PUBLIC_V4)
@pytest.mark.parametrize("form", [str, *JUDGED_BY_EMBEDDED, *ALWAYS_REFUSED])
def test_a_non_public_ipv4_address_is_refused_in_every_form(form: Callable[[str], str], v4: str) -> None:
    address = form(v4)
    assert refusal(address) is not None, address


@pytest.mark.parametrize("v4", PUBLIC_V4)
def test_forms_that_deliver_to_a_public_ipv4_address_are_allowed(v4: str) -> None:
    assert [refusal(form(v4)) for form in JUDGED_BY_EMBEDDED] == [None] * len(JUDGED_BY_EMBEDDED)
    assert all(refusal(form(v4)) is not None for form in ALWAYS_REFUSED)


def test_teredo_is_refused_even_between_public_addresses() -> None:
    assert "Teredo" in (refusal(teredo("65.54.227.120", "8.8.8.8")) or "")
