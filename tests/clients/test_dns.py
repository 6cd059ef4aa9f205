"""Endpoint URL rules with IPv6 literals, and host checks through a resolver we control:
one lookup, every address checked, in the order given."""

from __future__ import annotations

import socket
from collections.abc import Sequence

import pytest

from clients.dns import system_resolver, validate_url
from transforms.webhooks.urls import DoesNotResolve, InvalidUrl, check_form, public_addresses


class Answers:
    """A resolver answering from a table, counting its calls."""

    def __init__(self, table: dict[str, Sequence[str]]) -> None:
        self.table, self.calls = table, 0

    def __call__(self, host: str, port: int) -> Sequence[str]:
        self.calls += 1
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return self.table[host]


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("https://[2002:0808:0808::1]/hook", None),
        ("https://[64:ff9b::808:808]/hook", None),
        ("https://[::ffff:8.8.8.8]/hook", None),
        ("https://[::ffff:127.0.0.1]/hook", "IPv4-mapped form of 127.0.0.1"),
        ("https://[64:ff9b::a9fe:a9fe]/latest", "NAT64 form of 169.254.169.254"),
        ("https://[2002:a00:1::1]/hook", "6to4 form of 10.0.0.1"),
        ("https://[::7f00:1]/hook", "IPv4-compatible"),
        ("https://[fec0::1]/hook", "site-local"),
        ("https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/hook", "Teredo"),
        ("https://[64:ff9b:1::a00:1]/hook", "local-use NAT64"),
    ],
)
def test_ipv6_literal_urls(url: str, error: str | None) -> None:
    if error is None:
        assert validate_url(url, allow_private=False) == url
    else:
        with pytest.raises(InvalidUrl, match="non-public") as refused:
            validate_url(url, allow_private=False)
        assert error in str(refused.value)


def test_every_address_is_checked_from_one_lookup() -> None:
    answers = Answers({"hooks.example": ["8.8.8.8", "2001:4860:4860::8888", "64:ff9b::7f00:1"]})
    with pytest.raises(InvalidUrl, match=r"non-public address 64:ff9b::7f00:1 \(NAT64 form of 127.0.0.1"):
        validate_url("https://hooks.example/hook", allow_private=False, resolver=answers)
    assert answers.calls == 1


def test_public_addresses_keep_the_resolvers_order() -> None:
    answers = Answers({"hooks.example": ["2001:4860:4860::8888", "8.8.8.8"]})
    assert public_addresses("hooks.example", 443, answers) == ["2001:4860:4860::8888", "8.8.8.8"]


@pytest.mark.parametrize("table", [{}, {"hooks.example": []}])
def test_a_host_without_addresses_does_not_resolve(table: dict[str, Sequence[str]]) -> None:
    with pytest.raises(DoesNotResolve, match="does not resolve"):
        public_addresses("hooks.example", 443, Answers(table))


def test_private_addresses_are_not_looked_up_when_allowed() -> None:
    answers = Answers({})
    assert validate_url("https://anything.invalid/", allow_private=True, resolver=answers)
    assert answers.calls == 0


def test_the_system_resolver_answers_literals_without_duplicates() -> None:
    assert system_resolver("127.0.0.1", 443) == ["127.0.0.1"]
    assert system_resolver("::1", 443) == ["::1"]


@pytest.mark.parametrize(
    ("url", "allow_private", "target"),
    [
        ("https://hooks.example/x", False, ("hooks.example", 443)),
        ("https://[2001:db8::1]:8443/x", False, ("2001:db8::1", 8443)),
        ("http://hooks.example/x", True, ("hooks.example", 80)),
    ],
)
def test_check_form_gives_host_and_port_without_looking_up(
    url: str, allow_private: bool, target: tuple[str, int]
) -> None:
    assert check_form(url, allow_private=allow_private) == target
