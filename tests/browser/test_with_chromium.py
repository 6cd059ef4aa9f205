"""scripts/with-chromium.sh: the install step `make test` relies on, checked even where chromium is
already installed (a CI machine that has it would otherwise never run that step)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.browser.support import browser_required, chromium_path
from tests.support import ROOT

SCRIPT = ROOT / "scripts" / "with-chromium.sh"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=300)


def test_the_install_command_resolves_to_debians_chromium_package() -> None:
    if shutil.which("apt-get") is None:
        if browser_required():
            pytest.fail("apt-get is missing: scripts/with-chromium.sh installs chromium with it")
        pytest.skip("not a Debian machine: scripts/with-chromium.sh installs chromium with apt-get")

    result = run("--check-install")

    assert result.returncode == 0, result.stderr
    assert "ok: 'apt-get install -y --no-install-recommends chromium' resolves" in result.stdout


def test_check_install_fails_clearly_when_apt_has_no_chromium(tmp_path: Path) -> None:
    """A stand-in apt-get answering as apt does on a machine whose lists lack the package."""
    shim = tmp_path / "apt-get"
    shim.write_text(
        '#!/bin/sh\n[ "$1" = update ] && exit 0\necho "E: Unable to locate package chromium" >&2\nexit 100\n'
    )
    shim.chmod(0o755)

    result = run("--check-install", env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"})

    assert result.returncode == 1
    assert "cannot be resolved on this machine" in result.stderr
    assert "E: Unable to locate package chromium" in result.stderr


def test_the_command_runs_with_the_browser_exported() -> None:
    if chromium_path() is None and not browser_required():
        pytest.skip("chromium is not installed; scripts/with-chromium.sh would install it (make test does)")
    env = {k: v for k, v in os.environ.items() if k not in {"FLOKIT_CHROMIUM", "FLOKIT_TEST_REQUIRE_BROWSER"}}

    result = run("env", env=env)

    assert result.returncode == 0, result.stderr
    exported = dict(line.split("=", 1) for line in result.stdout.splitlines() if line.startswith("FLOKIT_"))
    assert exported["FLOKIT_TEST_REQUIRE_BROWSER"] == "1"
    assert os.access(exported["FLOKIT_CHROMIUM"], os.X_OK)
    assert "with-chromium: Chromium " in result.stderr


def test_a_chromium_chosen_by_the_caller_wins(tmp_path: Path) -> None:
    chosen = tmp_path / "my-chromium"
    chosen.write_text('#!/bin/sh\necho "Chromium 1.2.3 (a stand-in)"\n')
    chosen.chmod(0o755)

    result = run("sh", "-c", 'echo "$FLOKIT_CHROMIUM"', env={**os.environ, "FLOKIT_CHROMIUM": str(chosen)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(chosen)
    assert f"with-chromium: Chromium 1.2.3 (a stand-in) at {chosen}" in result.stderr

    missing = run("true", env={**os.environ, "FLOKIT_CHROMIUM": str(tmp_path / "nothing")})
    assert missing.returncode == 1
    assert f"FLOKIT_CHROMIUM={tmp_path / 'nothing'} is not an executable" in missing.stderr


def test_without_a_command_it_says_how_to_use_it() -> None:
    result = run()

    assert result.returncode == 2
    assert "usage: scripts/with-chromium.sh <command...> | --check-install" in result.stderr
