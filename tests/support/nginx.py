"""The shipped nginx front (deploy/nginx/) run for a test: Debian's nginx, a throwaway nginx.conf
whose server block `include`s the shipped `flokit-proxy.conf` and whose http-level part
(connection zone, upstream) is cut from the shipped `flokit.conf`, pointed at the test's API
processes. Only the TLS lines are left out, so what is tested is what ships."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support import ROOT, free_port, http_ok, wait_for

SHIPPED = ROOT / "deploy" / "nginx" / "flokit.conf"
SNIPPET = ROOT / "deploy" / "nginx" / "flokit-proxy.conf"
UPSTREAM_SHIPPED = "server 127.0.0.1:8000;"


def nginx_binary() -> str:
    """The nginx binary (Debian's `nginx` package), or skip (fail under FLOKIT_TEST_REQUIRE_NGINX=1)."""
    found = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)
    if found:
        return found
    message = "nginx is not installed (Debian: apt-get install nginx)"
    if os.environ.get("FLOKIT_TEST_REQUIRE_NGINX") == "1":
        pytest.fail(message)
    pytest.skip(message)


def http_level(*upstream_ports: int) -> str:
    """flokit.conf's http-level directives (everything before its first `server {`): the
    connection zone and the upstream, pointed at the test's API processes."""
    head = SHIPPED.read_text().split("\nserver {", 1)[0]
    assert "zone=flokit_perip" in head and "upstream flokit_api" in head and UPSTREAM_SHIPPED in head
    return head.replace(UPSTREAM_SHIPPED, " ".join(f"server 127.0.0.1:{port};" for port in upstream_ports))


def write_conf(tmp: Path, listen_port: int, *upstream_ports: int) -> Path:
    """An nginx.conf for an unprivileged, foreground nginx whose files all live under `tmp`."""
    temp = {name: tmp / name for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")}
    for path in temp.values():
        path.mkdir(exist_ok=True)
    conf = tmp / "nginx.conf"
    conf.write_text(
        # As root, nginx's workers would switch to `nobody`, which cannot enter pytest's tmp_path.
        ("user root;\n" if os.geteuid() == 0 else "")
        + f"""
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log info;
events {{ worker_connections 1024; }}
http {{
    access_log {tmp}/access.log;
    client_body_temp_path {temp["client_body"]};
    proxy_temp_path {temp["proxy"]};
    fastcgi_temp_path {temp["fastcgi"]};
    uwsgi_temp_path {temp["uwsgi"]};
    scgi_temp_path {temp["scgi"]};

{http_level(*upstream_ports)}
    server {{
        listen 127.0.0.1:{listen_port};
        include {SNIPPET};
    }}
}}
"""
    )
    return conf


def nginx_test(nginx: str, tmp: Path, conf: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [nginx, "-t", "-p", f"{tmp}/", "-c", str(conf)], capture_output=True, text=True, timeout=30, check=False
    )


@contextmanager
def running_nginx(prefix: Path, *upstream_ports: int) -> Iterator[tuple[str, int]]:
    """nginx in front of these ports, until the block ends: its base URL and port."""
    prefix.mkdir(parents=True, exist_ok=True)
    nginx = nginx_binary()
    port = free_port()
    conf = write_conf(prefix, port, *upstream_ports)
    checked = nginx_test(nginx, prefix, conf)
    assert checked.returncode == 0, checked.stderr
    with (prefix / "output.log").open("wb") as output:
        process = subprocess.Popen(
            [nginx, "-p", f"{prefix}/", "-c", str(conf), "-g", "daemon off;"], stdout=output, stderr=subprocess.STDOUT
        )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for(http_ok(f"{base}/healthz"), 15, "nginx /healthz", process)
        yield base, port
    finally:
        stop(process)


def stop(process: subprocess.Popen[bytes]) -> None:
    """Graceful shutdown (SIGQUIT), then fast (SIGTERM), then SIGKILL."""
    for sig in (signal.SIGQUIT, signal.SIGTERM, signal.SIGKILL):
        if process.poll() is not None:
            return
        process.send_signal(sig)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            continue
