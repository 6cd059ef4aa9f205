"""`flokit fx refresh` downloads the ECB rates atomically into the data directory, from a real
HTTP server on 127.0.0.1; ingest and the reports then use the refreshed rates."""

import dataclasses
import io
import json
import os
import threading
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support.cli import Ran, flokit_in_process
from warehouse import fx
from warehouse.paths import DataPaths
from warehouse.settings import Settings

CSV = "Date,USD,JPY,ARS,\n2026-11-20,1.2,180,1500,\n2026-11-19,1.1,170,N/A,\n"


def ecb_zip(csv: str) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("eurofxref-hist.csv", csv)
    return out.getvalue()


@pytest.fixture
def rates_server() -> Iterator[tuple[str, dict[str, bytes]]]:
    """Serves whatever bytes the test puts under a path; 404 for anything else."""
    files: dict[str, bytes] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = files.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", files
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()


def flokit(settings: Settings, *args: str) -> Ran:
    env = {**os.environ, **settings.child_env()}
    return flokit_in_process(env, *args)


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: fx.py")
def test_refresh_downloads_the_rates_atomically_and_they_win_over_the_bundled_ones(
    settings: Settings, rates_server: tuple[str, dict[str, bytes]]
) -> None:
    base, files = rates_server
    bundled = flokit(settings, "fx", "show", "--json")
    assert bundled.returncode == 0, bundled.stderr
    assert json.loads(bundled.stdout)["path"] == str(fx.BUNDLED)

    files["/eurofxref-hist.zip"] = ecb_zip(CSV)
    done = flokit(settings, "fx", "refresh", "--url", f"{base}/eurofxref-hist.zip", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["path"] == str(settings.paths.fx_rates)
    assert (result["first_day"], result["last_day"]) == ("2026-11-19", "2026-11-20")
    assert result["currencies"] == ["ARS", "EUR", "JPY", "USD"]
    assert settings.paths.fx_rates.read_bytes() == files["/eurofxref-hist.zip"]
    # What ingest reads from now on: ARS has a rate in this file, so it is no longer refused.
    assert fx.latest_rates(settings.paths) == {"ARS": 1500.0, "EUR": 1.0, "JPY": 180.0, "USD": 1.2}

    # A failed download or a file that is not an ECB history leaves the current file in place.
    kept = settings.paths.fx_rates.read_bytes()
    files["/broken.zip"] = b"<html>maintenance</html>"
    files["/nodate.zip"] = ecb_zip("Day,USD\n2026-11-21,1.3\n")
    for url in (f"{base}/missing.zip", f"{base}/broken.zip", f"{base}/nodate.zip"):
        failed = flokit(settings, "fx", "refresh", "--url", url, "--json")
        assert failed.returncode == 1 and "previous rates stay in use" in json.loads(failed.stderr)["error"], url
    assert settings.paths.fx_rates.read_bytes() == kept
    assert [p.name for p in settings.paths.fx_rates.parent.iterdir()] == ["eurofxref-hist.zip"]  # no temp files


def test_rates_refreshed_on_one_host_are_used_by_another_that_shares_no_disk(
    settings: Settings, rates_server: tuple[str, dict[str, bytes]], s3_url: str, tmp_path: Path
) -> None:
    base, files = rates_server
    files["/ecb.zip"] = ecb_zip(CSV)
    operator = dataclasses.replace(settings, lake_url=s3_url)
    done = flokit(operator, "fx", "refresh", "--url", f"{base}/ecb.zip", "--json")
    assert done.returncode == 0, done.stderr
    worker = DataPaths(tmp_path / "worker-host", s3_url)
    assert fx.latest_rates(worker)["JPY"] == 180  # not the bundled file's rate
    assert worker.fx_rates.read_bytes() == files["/ecb.zip"]
