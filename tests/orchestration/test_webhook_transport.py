"""The webhook client connects only to addresses it checked, with real sockets.

A name that answers a public address when checked and 127.0.0.1 when connected (DNS rebinding)
must not reach a listener on 127.0.0.1; TLS is still verified by the URL's host name; kept-alive
connections are reused; the scheme is checked at send time; environment proxies are ignored.
"""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from orchestration.webhooks.resources import WebhookHttpClient
from tests.support.webhook_receiver import Receiver, running_receiver

# A public address for names to answer. Tests connect to it only on the port of a local listener
# (a random high port, nothing answers there): refused or timed out after 0.5 s.
PUBLIC = "8.8.8.8"


@dataclass
class Listener:
    """A TCP listener on 127.0.0.1 that records every connection it accepts (a "reach")."""

    port: int
    accepted: list[tuple[str, int]] = field(default_factory=list)


@contextmanager
def tcp_listener() -> Iterator[Listener]:
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.1)
    listener, stop = Listener(server.getsockname()[1]), threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, peer = server.accept()
            except TimeoutError:
                continue
            listener.accepted.append(peer)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener
    finally:
        stop.set()
        thread.join(timeout=5)
        server.close()


class Rebinding:
    """Answers `first` for `name` on the first lookup and `then` on every later one."""

    def __init__(self, name: str, first: str, then: str) -> None:
        self.name, self.first, self.then, self.lookups = name, first, then, 0

    def answer(self) -> str:
        self.lookups += 1
        return self.first if self.lookups == 1 else self.then


class Answers:
    """A resolver answering from a table, counting its calls."""

    def __init__(self, table: dict[str, Sequence[str]]) -> None:
        self.table, self.calls = table, 0

    def __call__(self, host: str, port: int) -> Sequence[str]:
        self.calls += 1
        return self.table[host]


def rebind_getaddrinfo(monkeypatch: pytest.MonkeyPatch, rebinding: Rebinding) -> None:
    """The operating system's resolver, except that `rebinding.name` answers as it says.

    Patched at the socket module, below all of our code and urllib3's, so the test runs unchanged
    against any sender: one that looks the name up twice (check, then connect) is caught.
    """
    real: Callable[..., list[tuple[socket.AddressFamily, socket.SocketKind, int, str, tuple[str, int]]]]
    real = socket.getaddrinfo

    def getaddrinfo(host: object, port: object, *args: object, **kwargs: object) -> list[object]:
        if host == rebinding.name:
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (rebinding.answer(), port))]
        return real(host, port, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def short_timeouts(**config: object) -> WebhookHttpClient:
    return WebhookHttpClient(connect_timeout_s=0.5, read_timeout_s=0.5, **config)  # type: ignore[arg-type]


def test_a_name_that_rebinds_to_loopback_is_not_reached(monkeypatch: pytest.MonkeyPatch) -> None:
    rebinding = Rebinding("rebind.flokit.test", first=PUBLIC, then="127.0.0.1")
    rebind_getaddrinfo(monkeypatch, rebinding)
    with tcp_listener() as listener:
        status, error = short_timeouts(allow_private=False).post(
            url=f"https://{rebinding.name}:{listener.port}/hook", body=b"{}", headers={}
        )
    assert listener.accepted == []  # the old sender connected here, after checking 8.8.8.8
    assert rebinding.lookups == 1
    # It tried the checked public address (unreachable from here, or refused), nothing else.
    assert status is None and error is not None and error.startswith(("network error", "timeout")), error


def test_an_injected_resolver_is_asked_once_per_connection() -> None:
    answers = iter([[PUBLIC], ["127.0.0.1"]])
    calls: list[str] = []

    def resolver(host: str, port: int) -> Sequence[str]:
        calls.append(host)
        return next(answers)

    with tcp_listener() as listener:
        client = short_timeouts(allow_private=False).with_resolver(resolver)
        status, error = client.post(url=f"https://hooks.flokit.test:{listener.port}/", body=b"{}", headers={})
    assert listener.accepted == [] and calls == ["hooks.flokit.test"]
    assert status is None and error is not None and not error.startswith("refused"), error


def test_a_name_with_any_private_address_is_refused_at_connect_time() -> None:
    answers = Answers({"mixed.flokit.test": [PUBLIC, "::ffff:127.0.0.1"]})
    with tcp_listener() as listener:
        status, error = (
            short_timeouts(allow_private=False)
            .with_resolver(answers)
            .post(url=f"https://mixed.flokit.test:{listener.port}/", body=b"{}", headers={})
        )
    assert listener.accepted == [] and answers.calls == 1
    assert status is None and error is not None
    assert error.startswith("refused: ") and "non-public address ::ffff:127.0.0.1" in error


def test_the_scheme_is_checked_at_send_time() -> None:
    client = short_timeouts(allow_private=False)
    assert client.post(url=f"http://{PUBLIC}/", body=b"{}", headers={}) == (None, "refused: URL must use https")


def test_kept_alive_connections_are_reused_and_the_host_header_is_the_name() -> None:
    answers = Answers({"hooks.flokit.test": ["127.0.0.1"]})
    client = WebhookHttpClient(allow_private=True).with_resolver(answers)
    with running_receiver() as receiver:
        port = receiver.server.server_address[1]
        url = f"http://hooks.flokit.test:{port}/hook"
        assert [client.post(url=url, body=b"{}", headers={}) for _ in range(3)] == [(200, None)] * 3
        assert [r.header("Host") for r in receiver.requests] == [f"hooks.flokit.test:{port}"] * 3
    assert answers.calls == 1  # one connection, looked up once, used three times


def test_environment_proxies_are_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy would resolve the host itself, past our check: sends never go through one."""
    with tcp_listener() as proxy:
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        url = f"https://{PUBLIC}:{proxy.port}/"  # an unused port there: nothing answers
        status, _ = short_timeouts(allow_private=False).post(url=url, body=b"{}", headers={})
    assert proxy.accepted == [] and status is None


@dataclass
class Tls:
    cert: Path
    key: Path


@pytest.fixture(scope="module")
def tls_for_hooks_name(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    """A self-signed certificate for hooks.flokit.test only, made by the openssl command."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command is needed to make a test certificate")
    directory = tmp_path_factory.mktemp("tls")
    tls = Tls(directory / "cert.pem", directory / "key.pem")
    options = "req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=hooks.flokit.test"
    name = ["-addext", "subjectAltName=DNS:hooks.flokit.test"]
    files = ["-keyout", str(tls.key), "-out", str(tls.cert)]
    subprocess.run([openssl, *options.split(), *name, *files], check=True, capture_output=True)
    return tls


@contextmanager
def https_receiver(tls: Tls) -> Iterator[tuple[Receiver, list[str | None]]]:
    """The test receiver behind TLS, recording the SNI name of every handshake."""
    names: list[str | None] = []
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tls.cert, tls.key)
    context.sni_callback = lambda _sock, name, _ctx: names.append(name)  # type: ignore[assignment,func-returns-value]
    with running_receiver() as receiver:
        receiver.server.socket = context.wrap_socket(receiver.server.socket, server_side=True)
        yield receiver, names


def test_https_is_verified_by_the_host_name_while_connecting_to_the_checked_address(tls_for_hooks_name: Tls) -> None:
    answers = Answers({"hooks.flokit.test": ["127.0.0.1"], "other.flokit.test": ["127.0.0.1"]})
    client = WebhookHttpClient(allow_private=True, ca_bundle=str(tls_for_hooks_name.cert)).with_resolver(answers)
    with https_receiver(tls_for_hooks_name) as (receiver, sni):
        port = receiver.server.server_address[1]
        ok = client.post(url=f"https://hooks.flokit.test:{port}/hook", body=b"{}", headers={})
        status, error = client.post(url=f"https://other.flokit.test:{port}/hook", body=b"{}", headers={})
        assert ok == (200, None)
        assert [r.header("Host") for r in receiver.requests] == [f"hooks.flokit.test:{port}"]
    assert sni == ["hooks.flokit.test", "other.flokit.test"]
    # Same address, same certificate: refused only because the name does not match it.
    assert status is None and error is not None and "other.flokit.test" in error and "certificate" in error.lower()


def test_https_to_a_name_is_not_verified_by_the_address(tls_for_hooks_name: Tls) -> None:
    """Connecting to the checked IP must not make the IP the name TLS verifies: an untrusted
    certificate stays untrusted (no CA bundle given: certifi's does not know ours)."""
    client = WebhookHttpClient(allow_private=True).with_resolver(Answers({"hooks.flokit.test": ["127.0.0.1"]}))
    with https_receiver(tls_for_hooks_name) as (receiver, _):
        port = receiver.server.server_address[1]
        status, error = client.post(url=f"https://hooks.flokit.test:{port}/hook", body=b"{}", headers={})
        assert receiver.requests == []
    assert status is None and error is not None and "CERTIFICATE_VERIFY_FAILED" in error
