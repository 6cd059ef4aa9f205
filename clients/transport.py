"""webhooks and provider calls: an SSRF-safe requests transport, connecting only to an address that was checked.

urllib3 resolves the host inside `create_connection`, so checking the host's addresses before a
send and then letting urllib3 connect means two lookups: a name that answers a public address to
the check and 127.0.0.1 to the connect (DNS rebinding) would reach our own network. Here only the
opening of the TCP socket (`_new_conn`) is replaced: resolve once, check every address (unless
private addresses are allowed), connect to the checked addresses in order. Everything else stays
urllib3's: the Host header, SNI and certificate verification still use the URL's host name
(`HTTPSConnection.connect` wraps our socket with `server_hostname=self.host`), and keep-alive
reuse is unchanged, which is safe because a pooled connection was opened to a checked address and
a reconnect goes through `_new_conn`, so it resolves and checks again.

Proxies are refused: a proxy would resolve the host itself, out of our sight.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from requests.adapters import HTTPAdapter
from requests.exceptions import InvalidProxyURL
from urllib3 import HTTPConnectionPool, HTTPSConnectionPool, PoolManager
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError

from transforms.webhooks.urls import DoesNotResolve, Resolver, public_addresses, resolve


class Policy(Protocol):
    """Anything that resolves a host once and answers the addresses a connection may use
    (`AddressPolicy` for webhooks, `clients.egress.Egress` for integrations and ad accounts)."""

    def addresses(self, host: str, port: int) -> list[str]: ...


@dataclass(frozen=True)
class AddressPolicy:
    """How a connection finds the addresses it may connect to."""

    resolver: Resolver
    allow_private: bool  # FLOKIT_WEBHOOKS_ALLOW_PRIVATE: any address (development and tests)

    def addresses(self, host: str, port: int) -> list[str]:
        """One lookup; InvalidUrl if any address is not public (unless private ones are allowed)."""
        if self.allow_private:
            return resolve(host, port, self.resolver)
        return public_addresses(host, port, self.resolver)


def _connect_any(
    addresses: Sequence[str],
    port: int,
    timeout: float | None,
    source_address: tuple[str, int] | None,
    socket_options: Sequence[tuple[int, int, int | bytes]] | None,
) -> socket.socket:
    """A socket connected to the first of `addresses` that accepts, as urllib3's create_connection."""
    error: OSError | None = None
    for address in addresses:
        sock: socket.socket | None = None
        try:
            # AI_NUMERICHOST: parse the checked literal (scope id included), never a lookup.
            family, kind, proto, _, sockaddr = socket.getaddrinfo(
                address, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST
            )[0]
            sock = socket.socket(family, kind, proto)
            for option in socket_options or ():
                sock.setsockopt(*option)
            sock.settimeout(timeout)
            if source_address:
                sock.bind(source_address)
            sock.connect(sockaddr)
            return sock
        except OSError as exc:
            error = exc
            if sock is not None:
                sock.close()
    if error is None:
        raise OSError("no addresses to connect to")
    raise error


def _open(conn: HTTPConnection, policy: Policy) -> socket.socket:
    """`_new_conn` for both connection classes, raising what urllib3's own `_new_conn` raises.

    A non-public address raises InvalidUrl, which urllib3 and requests pass through unchanged, so
    the client reports the send as refused rather than as a network error.
    """
    # _dns_host keeps a trailing dot (an absolute name), as urllib3 resolves it; `host` is for TLS.
    host, port = conn._dns_host, conn.port
    try:
        addresses = policy.addresses(host, port)
    except DoesNotResolve as exc:
        cause = exc.__cause__
        raise NameResolutionError(
            conn.host, conn, cause if isinstance(cause, socket.gaierror) else socket.gaierror(str(exc))
        ) from exc
    timeout = conn.timeout if conn.timeout is None or isinstance(conn.timeout, int | float) else None
    try:
        sock = _connect_any(addresses, port, timeout, conn.source_address, conn.socket_options)
    except TimeoutError as exc:
        raise ConnectTimeoutError(
            conn, f"Connection to {conn.host} timed out. (connect timeout={conn.timeout})"
        ) from exc
    except OSError as exc:
        raise NewConnectionError(conn, f"Failed to establish a new connection: {exc}") from exc
    sys.audit("http.client.connect", conn, conn.host, conn.port)
    return sock


class PinnedHTTPConnection(HTTPConnection):
    def __init__(self, *args: Any, policy: Policy, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.policy = policy

    def _new_conn(self) -> socket.socket:
        return _open(self, self.policy)


class PinnedHTTPSConnection(HTTPSConnection):
    def __init__(self, *args: Any, policy: Policy, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.policy = policy

    def _new_conn(self) -> socket.socket:
        return _open(self, self.policy)


class PinnedHTTPConnectionPool(HTTPConnectionPool):
    ConnectionCls = PinnedHTTPConnection


class PinnedHTTPSConnectionPool(HTTPSConnectionPool):
    ConnectionCls = PinnedHTTPSConnection


class PinnedPoolManager(PoolManager):
    """A PoolManager whose connections open through an AddressPolicy (pools keyed as usual)."""

    def __init__(self, *, policy: Policy, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.policy = policy
        self.pool_classes_by_scheme = {"http": PinnedHTTPConnectionPool, "https": PinnedHTTPSConnectionPool}

    def _new_pool(
        self, scheme: str, host: str, port: int, request_context: dict[str, Any] | None = None
    ) -> HTTPConnectionPool:
        # Not through connection_pool_kw: every key there becomes part of the pool key.
        pool = super()._new_pool(scheme, host, port, request_context)
        pool.conn_kw["policy"] = self.policy
        return pool


class PinnedAdapter(HTTPAdapter):
    """A requests adapter that connects only to addresses its policy resolved and checked."""

    def __init__(self, policy: Policy, **kwargs: Any) -> None:
        self.policy = policy  # before super().__init__, which builds the pool manager
        super().__init__(**kwargs)

    def init_poolmanager(self, connections: int, maxsize: int, block: bool = False, **pool_kwargs: Any) -> None:
        self._pool_connections, self._pool_maxsize, self._pool_block = connections, maxsize, block
        self.poolmanager = PinnedPoolManager(
            policy=self.policy, num_pools=connections, maxsize=maxsize, block=block, **pool_kwargs
        )

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        raise InvalidProxyURL("pinned connections do not go through proxies: a proxy would resolve the host itself")
