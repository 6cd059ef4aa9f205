"""integrations and ad accounts: where their provider calls may go (public addresses only), the egress policy.

The operator sets the addresses a sync calls (`base_url`, `endpoint_url`, `snowflake_url`,
`token_url`, ...), and what the target answers reaches the sync history. Without a rule, such an
address could point at the instance's own network (loopback, the cloud metadata service at
169.254.169.254) and read it back through `error_message`. So the outbound-webhook rule applies
(`transforms.webhooks.urls`, `transforms.webhooks.addresses`): https to hosts whose every address is
public, checked when the integration is connected and again when it is called, since DNS can
change in between. A host the operator names in FLOKIT_INTEGRATIONS_ALLOW_PRIVATE_HOSTS (a proxy
on the private network, a test's fake provider on 127.0.0.1) may resolve anywhere and be reached
over plain http.

A type's default address (the vendor's production API) is not looked up by `check_config`: it is
FloKit's, not the operator's, and an instance without DNS (a test, an air-gapped install) must
still be able to connect; the connections' own check covers it like any other address.

Calls go through `clients.transport.PinnedAdapter` where the client's HTTP session
is ours (one lookup per connection, every address checked, no second lookup to connect); SDKs
whose connections we cannot reach (boto3, Snowflake's connector, Google's and Apple's libraries)
have their addresses checked when the sync starts (`check_config`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from clients.dns import system_resolver
from transforms.integrations.kinds import ConfigProblem, Field, ValidConfig
from transforms.webhooks.urls import InvalidUrl, Resolver, check_form, private_hosts, public_addresses, resolve

# Snowflake's address when the config names only the account (the connector's own rule).
SNOWFLAKE_HOST = "{account}.snowflakecomputing.com"


def _host(host: str) -> str:
    return host.strip().lower().rstrip(".").strip("[]")


@dataclass(frozen=True)
class Egress:
    """The address policy of one process: public addresses, plus the hosts the operator named."""

    private_hosts: frozenset[str] = frozenset()
    resolver: Resolver = field(default=system_resolver, compare=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Egress:
        """The policy of FLOKIT_INTEGRATIONS_ALLOW_PRIVATE_HOSTS, read when a client is built (a
        sync runs in a Dagster run process, whose environment is the daemon's, as the Play and App
        Store connectors read their settings)."""
        return cls(frozenset(private_hosts(os.environ if env is None else env)))

    @classmethod
    def of(cls, hosts: Iterable[str]) -> Egress:
        return cls(frozenset(_host(h) for h in hosts))

    def named(self, host: str) -> bool:
        """Whether the operator allowed this host to be private (and plain http)."""
        return _host(host) in self.private_hosts

    def check(self, url: str, *, resolve_host: bool = True) -> None:
        """InvalidUrl unless `url` is https to public addresses, or names an allowed host."""
        host, port = check_form(url, allow_private=True)  # everything but the scheme
        if self.named(host):
            return
        if resolve_host:  # first: "resolves to non-public address" says more than "must use https"
            public_addresses(host, port, self.resolver)
        check_form(url, allow_private=False)

    def addresses(self, host: str, port: int) -> list[str]:
        """One lookup; InvalidUrl if any address is not public and the host was not named."""
        if self.named(host):
            return resolve(host, port, self.resolver)
        return public_addresses(host, port, self.resolver)


def addresses_of(fields: Iterable[Field], config: ValidConfig) -> list[tuple[str, str, bool]]:
    """(field, URL, is the type's default) for every address the config makes FloKit call."""
    found: list[tuple[str, str, bool]] = []
    for f in fields:
        value = config.options.get(f.name)
        if f.kind == "url" and isinstance(value, str) and value:
            default = isinstance(f.default, str) and value.rstrip("/") == f.default.rstrip("/")
            found.append((f.name, value, default))
    account = config.options.get("snowflake_account")
    if isinstance(account, str) and account and not config.options.get("snowflake_url"):
        found.append(("snowflake_account", "https://" + SNOWFLAKE_HOST.format(account=account), False))
    return found


def check_config(fields: Iterable[Field], config: ValidConfig, egress: Egress) -> None:
    """ConfigProblem naming the first address the policy refuses: when connecting, and when a sync
    starts (DNS may have changed since). A type's default address is checked for its form only."""
    for name, url, default in addresses_of(fields, config):
        try:
            egress.check(url, resolve_host=not default)
        except InvalidUrl as exc:
            raise ConfigProblem(
                name,
                f"{exc}; integrations may call only public addresses over https "
                "(a host listed in FLOKIT_INTEGRATIONS_ALLOW_PRIVATE_HOSTS may be private or http)",
            ) from None
