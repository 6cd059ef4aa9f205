"""The check `flokit up` runs after start names a code location that failed to load and its error,
asked of a real Dagster webserver serving a location whose code raises at import."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from cli.location import LocationWatch
from tests.support import BIN, free_port

pytestmark = pytest.mark.e2e


def test_a_location_that_fails_to_load_is_named_with_its_error(tmp_path: Path) -> None:
    (tmp_path / "broken_defs.py").write_text('raise RuntimeError("the definitions cannot load: FLOKIT-BROKEN")\n')
    (tmp_path / "workspace.yaml").write_text(
        "load_from:\n  - python_file:\n      relative_path: broken_defs.py\n      location_name: broken\n"
    )
    (tmp_path / "home").mkdir()
    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "home")}
    with (tmp_path / "webserver.log").open("w") as log:
        webserver = subprocess.Popen(
            [str(BIN / "dagster-webserver"), "-h", "127.0.0.1", "-p", str(port), "-w", "workspace.yaml"],
            cwd=tmp_path,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            watch = LocationWatch(f"http://127.0.0.1:{port}", "broken", timeout_s=120)
            reason = None
            while reason is None and not watch.done:
                reason = watch(time.monotonic())
                time.sleep(0.2)
        finally:
            webserver.terminate()
            webserver.wait(timeout=30)
    assert reason is not None
    assert reason.startswith("code location broken failed to load: ")
    assert "caused by: RuntimeError: the definitions cannot load: FLOKIT-BROKEN" in reason


def test_a_webserver_that_never_answers_is_a_timeout_naming_the_location() -> None:
    watch = LocationWatch(f"http://127.0.0.1:{free_port()}", "flokit", timeout_s=1, started_at=time.monotonic())
    reason = None
    deadline = time.monotonic() + 10
    while reason is None and time.monotonic() < deadline:
        reason = watch(time.monotonic())
        time.sleep(0.1)
    assert reason == (
        "code location flokit did not load within 1 s: the Dagster webserver did not answer (ConnectionError)"
    )
