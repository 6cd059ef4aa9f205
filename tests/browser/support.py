"""The real-browser harness: Debian's chromium through Playwright's sync API, with guards.

Why our own helpers and not pytest-playwright: the plugin errors under FloKit's `-W error`
(PytestRemovedIn10Warning from its own fixtures) and `playwright install` downloads a browser
from a CDN that CI cannot reach; so we launch the distribution's chromium by path
(`scripts/with-chromium.sh` installs it and exports FLOKIT_CHROMIUM). See
/work/shared/design/dashboard.md §3 for the measurements behind the arguments below.

A page the operator sees must load nothing from outside the machine and log no error: `PageGuard`
records every console error, uncaught page error, failed request and non-127.0.0.1 request
(aborted, so a test never waits on DNS) and the `page` fixture fails the test on any of them.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tests.support import ROOT
from warehouse.instance_key import ensure_instance_key
from warehouse.settings import Settings

CHROMIUM_ENV = "FLOKIT_CHROMIUM"
REQUIRE_ENV = "FLOKIT_TEST_REQUIRE_BROWSER"
SCREENSHOTS_ENV = "FLOKIT_SCREENSHOTS_DIR"
DEFAULT_SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"

# Sandbox off: Playwright already passes --no-sandbox by default, and the sandbox fails as root.
# The rest stop chromium's own background traffic (component updates, sync, safe-browsing lists),
# which would otherwise show up as requests to Google hosts on a CI machine with no route out.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

# The two widths every screen must be readable at (design note §5: desktop and a phone).
SCREENSHOT_WIDTHS = (1280, 390)
DESKTOP = 1280
LOCAL_HOSTS = {"127.0.0.1"}

TWO_FRAMES = "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))"

written_screenshots: list[Path] = []  # this run's, for the terminal summary


def flokit_env(settings: Settings) -> dict[str, str]:
    """The environment gunicorn or a `flokit` command needs to run on exactly these settings.

    The dashboard signs its cookie with a key derived from the instance key (503 without one), and
    `Settings.child_env` never carries the key itself: hand over the one these settings hold in
    memory, or else create the data directory's key file, as `flokit db upgrade` would.
    """
    env = {**os.environ, **settings.child_env()}
    if settings.instance_key:
        env["FLOKIT_SECRET_KEY"] = settings.instance_key
    else:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        ensure_instance_key(settings)
    return env


def expect(locator: Any) -> Any:
    """Playwright's retrying assertions (string predicates like `wait_for_function` run through
    eval, which the dashboard's CSP forbids)."""
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(locator)


def chromium_path() -> str | None:
    """The chromium to drive: FLOKIT_CHROMIUM (set by scripts/with-chromium.sh), else PATH."""
    return os.environ.get(CHROMIUM_ENV) or shutil.which("chromium") or shutil.which("chromium-browser")


def browser_required() -> bool:
    return os.environ.get(REQUIRE_ENV) == "1"


def is_local(url: str) -> bool:
    """True for URLs that never leave the machine: 127.0.0.1 and in-page schemes (data:, blob:, about:)."""
    parts = urlsplit(url)
    if parts.scheme in {"data", "blob", "about", "chrome-error"}:
        return True
    return parts.hostname in LOCAL_HOSTS


@dataclass
class PageGuard:
    """Everything a browser context did that an operator's page must never do, in the order seen."""

    problems: list[str] = field(default_factory=list)
    # Console errors a test expects (a 401, 409 or 410 page it loads on purpose): each entry is a
    # substring that excuses exactly one console error; one never logged is a problem too (`unmet`).
    expected: list[str] = field(default_factory=list)
    excused: list[str] = field(default_factory=list)

    def expect_console_error(self, text: str) -> None:
        """Excuse the next console error containing `text`, once. Chromium logs every HTTP error a
        page or XHR loads ("Failed to load resource: ... status of 410 (GONE)"), so a test that
        loads one on purpose says which, and nothing else is excused."""
        self.expected.append(text)

    def unmet(self) -> list[str]:
        return [f"expected console error never logged: {text!r}" for text in self.expected]

    def failures(self) -> list[str]:
        return self.problems + self.unmet()

    @classmethod
    def watch(cls, context: Any) -> PageGuard:
        """Attach to a Playwright BrowserContext before its first page is opened.

        Non-local requests are aborted through `context.route`, so a page that reaches for a CDN
        fails fast here instead of hanging on DNS, and the attempt is recorded once (its abort
        also fires `requestfailed`, which is not counted again).
        """
        guard = cls()

        def on_console(message: Any) -> None:
            if message.type == "error":
                where = message.location.get("url") or "?"
                line = f"console error: {message.text} (at {where})"
                excuse = next((t for t in guard.expected if t in message.text), None)
                if excuse is None:
                    guard.problems.append(line)
                else:
                    guard.expected.remove(excuse)
                    guard.excused.append(line)

        def on_page_error(error: Any) -> None:
            guard.problems.append(f"page error: {error.error.message}")

        def on_request_failed(request: Any) -> None:
            if is_local(request.url):
                guard.problems.append(f"request failed: {request.method} {request.url}: {request.failure}")

        def on_route(route: Any) -> None:
            request = route.request
            if is_local(request.url):
                route.fallback()
            else:
                guard.problems.append(f"non-local request (aborted): {request.method} {request.url}")
                route.abort("blockedbyclient")

        context.on("console", on_console)
        context.on("weberror", on_page_error)
        context.on("requestfailed", on_request_failed)
        context.route("**/*", on_route)
        return guard

    def report(self) -> str:
        failures = self.failures()
        lines = [f"the browser saw {len(failures)} problem(s) a page must not have:"]
        lines += [f"  - {p}" for p in failures]
        return "\n".join(lines)


def press_sign_in(page: Any, link: str) -> None:
    """Open a one-time sign-in link and press its page's Sign in button with the mouse, as an
    operator does: opening the link uses nothing, the button does; the page lands on Actions."""
    response = page.goto(link)
    assert response is not None and response.status == 200, response and response.status
    # The icon is fetched after the load event: leaving before it arrives aborts it, which the
    # guard counts as a failed request.
    page.wait_for_load_state("networkidle")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/dashboard/actions")
    page.wait_for_load_state("networkidle")


def screenshots_dir() -> Path:
    return Path(os.environ.get(SCREENSHOTS_ENV) or DEFAULT_SCREENSHOTS)


def tables_scrolling_sideways(page: Any, *, phone: bool = True) -> list[str]:
    """The captions of the tables that need a sideways scroll at the current width. On a desktop
    (`phone=False`) that is any table. On a phone, report matrices (`table.report-table`) and
    editors (a field to type in or pick from in a cell; a verb's hidden CSRF input and its
    dialog's fields do not count) are read across and may scroll; any other table shows every
    column as one card per row (app.js)."""
    return list(
        page.evaluate(
            """phone => [...document.querySelectorAll('.table-wrap')]
                 .filter(w => !phone || (!w.querySelector('table.report-table') && ![...w.querySelectorAll(
                     'input:not([type=hidden]), select, textarea')].some(f => !f.closest('dialog'))))
                 .filter(w => w.scrollWidth > w.clientWidth)
                 .map(w => (w.querySelector('caption') || w).textContent.trim())""",
            phone,
        )
    )


def shoot(page: Any, name: str) -> list[Path]:
    """Full-page screenshots of `page` at 1280 and 390 px wide, for a person to look at.

    Written to $FLOKIT_SCREENSHOTS_DIR (default test-artifacts/screenshots/) as
    `<name>-<width>.png`, kept after the run (pytest prints where). The viewport is restored, so a
    test can go on after a shot. A full-page shot wider than its width means the page overflows.
    Fails when a table needs a sideways scroll at 1280 px, or a list or detail table at 390 px.
    """
    folder = screenshots_dir()
    folder.mkdir(parents=True, exist_ok=True)
    before = page.viewport_size
    paths = []
    try:
        for width in SCREENSHOT_WIDTHS:
            page.set_viewport_size({"width": width, "height": before["height"] if before else 800})
            # Responsive widgets (Chart.js) resize from a ResizeObserver on the next frames; shooting
            # before then captures the old width as an overflow that a person would never see.
            page.evaluate(TWO_FRAMES)
            path = folder / f"{name}-{width}.png"
            page.screenshot(path=str(path), full_page=True)
            # Every shot is also a check: a column cut off at either width is what a person
            # looking at the screenshot would call a defect (the shot is written first, to look at).
            sideways = tables_scrolling_sideways(page, phone=width < DESKTOP)
            assert sideways == [], f"{name}: at {width} px these tables need a sideways scroll: {sideways}"
            paths.append(path)
            written_screenshots.append(path)
    finally:
        if before:
            page.set_viewport_size(before)
    return paths


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk; raises if the file is not a PNG."""
    head = path.read_bytes()[:24]
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise ValueError(f"{path} is not a PNG")
    width, height = struct.unpack(">II", head[16:24])
    return width, height


@dataclass(frozen=True)
class Violation:
    id: str
    impact: str | None
    targets: list[str]
    help: str

    def line(self) -> str:
        return f"{self.id} ({self.impact}): {self.help} -> {', '.join(self.targets)}"


def axe_violations(page: Any) -> list[Violation]:
    """axe-core's violations on the page as it is now (axe ships inside the wheel; nothing is fetched).

    axe is injected with `page.evaluate`, which the page's CSP does not govern, so this works on
    pages that forbid inline script.
    """
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    return [
        Violation(
            id=v["id"],
            impact=v.get("impact"),
            targets=[" ".join(map(str, node["target"])) for node in v["nodes"]],
            help=v["help"],
        )
        for v in results.response["violations"]
    ]


def assert_accessible(page: Any) -> None:
    """Fail with each axe violation's id, impact and target selectors (the acceptance bar: zero)."""
    violations = axe_violations(page)
    if violations:
        lines = "\n".join(f"  - {v.line()}" for v in violations)
        raise AssertionError(f"axe found {len(violations)} accessibility violation(s) on {page.url}:\n{lines}")


def child_pytest(folder: Path, suite: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run `suite` with our browser fixtures in a child pytest, so that its failures do not fail ours."""
    (folder / "conftest.py").write_text('pytest_plugins = ["tests.browser.conftest"]\n')
    (folder / "test_child.py").write_text(suite)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-W", "error", "-p", "no:cacheprovider", "-rA", str(folder)],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(ROOT), "FLOKIT_SCREENSHOTS_DIR": str(folder / "shots"), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
