"""Fixtures for real-browser tests: one chromium per run, a fresh guarded page per test.

`browser` skips when Playwright or chromium is missing, and fails instead under
FLOKIT_TEST_REQUIRE_BROWSER=1 (`make test` sets it through scripts/with-chromium.sh), as the
PostgreSQL fixtures do. Every test under tests/browser is marked `browser` (`pytest -m browser`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.support import (
    CHROMIUM_ARGS,
    PageGuard,
    browser_required,
    chromium_path,
    flokit_env,
    screenshots_dir,
    written_screenshots,
)
from tests.support import GunicornServer, gunicorn_server
from tests.support.demo_world import World, copy_world
from warehouse.db import close_database
from warehouse.settings import Settings

HERE = Path(__file__).resolve().parent
launch_seconds: list[float] = []
LOADED_AT = time.time()  # before collection: screenshots newer than this are this run's
launched_version: list[str] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.browser)


def _unavailable(reason: str) -> None:
    if browser_required():
        pytest.fail(f"{reason}; FLOKIT_TEST_REQUIRE_BROWSER=1 (make test installs it: scripts/with-chromium.sh)")
    pytest.skip(f"browser tests need {reason} (make test installs chromium: scripts/with-chromium.sh)")


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    """Debian's chromium, headless, launched once for tests/browser (about 0.7 s).

    Package scope, not session: Playwright's sync API keeps an asyncio loop running in this
    thread while it lives, and Dagster's in-process runs (tests/e2e, tests/orchestration, which
    run after tests/browser) then leave an un-awaited `shutdown_asyncgens` coroutine behind,
    which `-W error` turns into failures. Stopping Playwright when tests/browser ends avoids it."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package (make venv installs it)")
    executable = chromium_path()
    if executable is None:
        _unavailable("chromium on PATH or FLOKIT_CHROMIUM")
    if not os.access(executable, os.X_OK):
        _unavailable(f"chromium, but FLOKIT_CHROMIUM={executable} is not an executable")
    started = time.monotonic()
    playwright = sync_playwright().start()
    try:
        chromium = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        launch_seconds.append(time.monotonic() - started)
        launched_version.append(chromium.version)
        yield chromium
        chromium.close()
    finally:
        playwright.stop()


@pytest.fixture
def browser_context(browser: Any) -> Iterator[tuple[Any, PageGuard]]:
    """A new context (own cookies and storage) at 1280x800, with a PageGuard attached; closed after."""
    context = browser.new_context(viewport={"width": 1280, "height": 800}, device_scale_factor=1)
    guard = PageGuard.watch(context)
    try:
        yield context, guard
    finally:
        context.close()


@pytest.fixture
def page(browser_context: tuple[Any, PageGuard]) -> Any:
    """A page whose test fails on any console error, page error, failed request or request to a host
    other than 127.0.0.1, with the list in the failure (checked by `pytest_runtest_call` below)."""
    context, _ = browser_context
    return context.new_page()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """After the body of a test that used `page`: close its context and fail the test on problems.

    Closing first delivers the events still in flight (the sync API hands them over only when the
    driver is next called). Done here rather than in the fixture's teardown so that the test itself
    is reported FAILED, not "passed" plus a teardown error; when the body already failed, the
    problems are attached to its report as a "browser" section (often they are the cause).
    """
    watched = "page" in getattr(item, "fixturenames", ()) and hasattr(item, "funcargs")
    try:
        result = yield
    except BaseException:
        if watched:
            context, guard = item.funcargs["browser_context"]
            with contextlib.suppress(Exception):  # the test's own failure is the one to report
                context.close()
            if guard.failures():
                item.add_report_section("call", "browser", guard.report())
        raise
    if watched:
        context, guard = item.funcargs["browser_context"]
        context.close()
        if guard.failures():
            pytest.fail(guard.report(), pytrace=False)
    return result


@pytest.fixture
def flokit_server(settings: Settings, tmp_path: Path) -> Iterator[GunicornServer]:
    """FloKit itself under gunicorn, as `flokit up` runs it, on this test's database (SQLite, and
    PostgreSQL under `make test`). Two workers, so that state one worker keeps for itself (a secret
    key made per process, an in-memory session) shows up as a failure instead of passing by luck."""
    with gunicorn_server(flokit_env(settings), workers=2, log_dir=tmp_path) as server:
        yield server


@pytest.fixture(scope="module")
def module_settings(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> Iterator[Settings]:
    """One SQLite database and data directory for a whole module whose tests each work in a
    workspace of their own (`workspace`) and touch nothing else in it: a module opts in by
    overriding `settings` and `flokit_server` with these two (tests/browser/test_dashboard_actions.py)."""
    data_dir = tmp_path_factory.mktemp("module") / "data"
    data_dir.mkdir()
    shutil.copyfile(sqlite_template, data_dir / "flokit.db")
    url = f"sqlite:///{data_dir / 'flokit.db'}"
    yield Settings(data_dir=data_dir, database_url=url)
    close_database(url)


@pytest.fixture(scope="module")
def module_server(module_settings: Settings) -> Iterator[GunicornServer]:
    """`flokit_server` for a module on `module_settings`: started once instead of once per test (a
    start was most of such a test's time), still two workers."""
    with gunicorn_server(flokit_env(module_settings), workers=2, log_dir=module_settings.data_dir.parent) as server:
        yield server


@pytest.fixture
def demo_world(demo_world_root: Path, tmp_path: Path) -> Iterator[World]:
    """This test's own copy of the populated demo world (database, lake, DuckDB files, instance key):
    what the test writes there (a rollback, a new action) no other test reads."""
    world = copy_world(demo_world_root, tmp_path)
    try:
        yield world
    finally:
        close_database(world.settings.database_url)


@pytest.fixture
def demo_server(demo_world: World, tmp_path: Path) -> Iterator[GunicornServer]:
    """FloKit under gunicorn (two workers, as `flokit_server`) on this test's copy of the demo world."""
    with gunicorn_server(flokit_env(demo_world.settings), workers=2, log_dir=tmp_path) as server:
        yield server


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if launch_seconds:
        terminalreporter.write_line(
            f"browser: chromium {launched_version[0]} launched once in {launch_seconds[0]:.2f} s"
        )
    # Under pytest-xdist this runs in the controller, which shot nothing itself: count the files
    # the workers wrote during this run.
    folder = screenshots_dir()
    shots = written_screenshots or (
        [p for p in folder.glob("*.png") if p.stat().st_mtime >= LOADED_AT] if folder.is_dir() else []
    )
    if shots:
        terminalreporter.write_line(f"browser screenshots: {len(shots)} written to {folder.resolve()}")
