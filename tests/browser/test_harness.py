"""The harness proven on its own: the vendored htmx and Chart.js run under the dashboard's CSP in
Debian's chromium, and each guard catches what it exists for (negative controls).

The pages are served by a real HTTP server on 127.0.0.1 sending the dashboard's CSP header, so
what passes here is what the dashboard's templates can rely on: external scripts from 'self',
chart data in a `<script type="application/json">` block, no inline script.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from api.dashboard import CSP  # the policy the dashboard sends, not a copy that could drift from it
from tests.browser.support import (
    PageGuard,
    assert_accessible,
    axe_violations,
    child_pytest,
    png_size,
    screenshots_dir,
    shoot,
)
from tests.support import ROOT, serving

VENDOR = ROOT / "api" / "dashboard" / "static" / "vendor"
NO_CSP = "/no-csp/"  # pages under this path are served without the CSP, to exercise the request guard alone

CHART_DATA = {
    "labels": ["Search", "Social", "Video"],
    "datasets": [{"label": "ROAS 30 d", "data": [1.25, 0.8, 2.1]}],
}
HEAD = (
    '<meta charset="utf-8"><link rel="icon" href="data:,">'
    '<meta name="htmx-config" content=\'{"includeIndicatorStyles": false, "allowEval": false}\'>'
)

PAGES = {
    "chart.html": f"""<!doctype html>
<html lang="en"><head>{HEAD}<title>Harness chart · FloKit</title>
<script src="/vendor/htmx-2.0.11.min.js" defer></script>
<script src="/vendor/chart-4.6.1.umd.min.js" defer></script>
<script src="/draw.js" defer></script>
</head><body><main>
<h1>Payback by campaign</h1>
<canvas id="payback" role="img" aria-label="ROAS at 30 days: Search 1.25, Social 0.8, Video 2.1"></canvas>
<script type="application/json" id="payback-data">{json.dumps(CHART_DATA)}</script>
<button type="button" hx-get="/fragment.html" hx-target="#out">Load more</button>
<div id="out"></div>
</main></body></html>""",
    "fragment.html": "<p id=loaded>Loaded by htmx</p>",
    "draw.js": """
const data = JSON.parse(document.getElementById("payback-data").textContent);
new Chart(document.getElementById("payback"), {type: "bar", data: data, options: {animation: false}});
""",
    "inline.html": f"""<!doctype html><html lang="en"><head>{HEAD}<title>Inline</title></head>
<body><main><h1>Inline</h1><script>document.title = "inline script ran";</script></main></body></html>""",
    "remote.html": f"""<!doctype html><html lang="en"><head>{HEAD}<title>Remote</title>
<script src="http://example.invalid/x.js"></script></head><body><main><h1>Remote</h1></main></body></html>""",
    "broken.html": f"""<!doctype html><html lang="en"><head>{HEAD}<title>Broken</title>
<script src="/throw.js"></script></head>
<body><main><h1>Broken</h1><img src="/hangup" alt="never arrives"></main></body></html>""",
    "throw.js": 'throw new Error("harness: thrown on purpose");',
    "inaccessible.html": "<!doctype html><html><head><meta charset=utf-8><link rel=icon href='data:,'></head>"
    "<body><button></button><input type=text></body></html>",
}


class Handler(SimpleHTTPRequestHandler):
    """Static files with the dashboard's CSP; `/hangup` closes the connection without an answer."""

    def end_headers(self) -> None:
        if not self.path.startswith(NO_CSP):
            self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def do_GET(self) -> None:
        if self.path == "/hangup":
            self.close_connection = True
            return
        super().do_GET()

    def log_message(self, format: str, *args: Any) -> None:  # the test output is not the place
        pass


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("site")
    shutil.copytree(VENDOR, root / "vendor")
    (root / "no-csp").mkdir()
    for name, text in PAGES.items():
        (root / name).write_text(text, encoding="utf-8")
        (root / "no-csp" / name).write_text(text, encoding="utf-8")
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(root)))) as base:
        yield base


def visit(context: Any, url: str) -> Any:
    """Open `url` in a new page of a guarded context. `goto` returns after the load event, which
    waits for these pages' scripts and images, so their errors have been delivered by then."""
    page = context.new_page()
    page.goto(url)
    return page


def test_vendored_htmx_and_chartjs_run_under_the_dashboard_csp(page: Any, site: str) -> None:
    response = page.goto(f"{site}/chart.html")
    assert response.headers["content-security-policy"] == CSP

    page.wait_for_function("() => window.Chart && Chart.getChart('payback') !== undefined")
    drawn = page.evaluate(
        """() => { const c = Chart.getChart('payback');
                   const datasets = c.data.datasets.map(d => ({label: d.label, data: d.data}));
                   return {labels: c.data.labels, datasets: datasets}; }"""
    )
    assert drawn == CHART_DATA
    assert page.evaluate("() => document.getElementById('payback').width") > 0

    assert page.evaluate("() => window.htmx.version") == "2.0.11"
    page.get_by_role("button", name="Load more").click()
    assert page.locator("#loaded").inner_text() == "Loaded by htmx"

    assert_accessible(page)


def test_shoot_writes_full_page_pngs_at_both_widths(page: Any, site: str) -> None:
    page.goto(f"{site}/chart.html")
    page.wait_for_function("() => window.Chart && Chart.getChart('payback') !== undefined")
    expected = [screenshots_dir() / f"harness-chart-{w}.png" for w in (1280, 390)]
    for path in expected:
        path.unlink(missing_ok=True)

    assert shoot(page, "harness-chart") == expected
    assert [png_size(p)[0] for p in expected] == [1280, 390]
    assert page.viewport_size == {"width": 1280, "height": 800}  # restored for the rest of the test


def test_guard_records_a_csp_violation_from_an_inline_script(browser_context: tuple[Any, PageGuard], site: str) -> None:
    context, guard = browser_context
    page = visit(context, f"{site}/inline.html")

    assert page.title() == "Inline"  # the inline script did not run
    # Chromium 156 words it "Executing inline script violates the following Content Security Policy
    # directive 'script-src 'self''..." (older builds: "Refused to execute inline script because...").
    assert any(
        p.startswith("console error: ") and "inline script" in p and "Content Security Policy" in p
        for p in guard.problems
    ), guard.report()


def test_guard_aborts_and_records_a_request_off_the_machine(browser_context: tuple[Any, PageGuard], site: str) -> None:
    context, guard = browser_context
    failures: list[tuple[str, str]] = []
    context.on("requestfailed", lambda request: failures.append((request.url, request.failure)))
    visit(context, f"{site}{NO_CSP}remote.html")

    assert "non-local request (aborted): GET http://example.invalid/x.js" in guard.problems, guard.report()
    # Aborted by the guard, not left to fail in DNS (which, on a machine with a resolver, could answer).
    assert failures == [("http://example.invalid/x.js", "net::ERR_BLOCKED_BY_CLIENT.Inspector")]  # Playwright's abort


def test_the_csp_alone_stops_a_request_off_the_machine(browser_context: tuple[Any, PageGuard], site: str) -> None:
    context, guard = browser_context
    visit(context, f"{site}/remote.html")

    assert not any(p.startswith("non-local request") for p in guard.problems), guard.report()
    assert any(
        p.startswith("console error: ") and "'http://example.invalid/x.js'" in p and "Content Security Policy" in p
        for p in guard.problems
    ), guard.report()


def test_guard_records_page_errors_and_failed_requests(browser_context: tuple[Any, PageGuard], site: str) -> None:
    context, guard = browser_context
    visit(context, f"{site}/broken.html")

    assert "page error: harness: thrown on purpose" in guard.problems, guard.report()
    assert any(p.startswith(f"request failed: GET {site}/hangup: net::ERR_EMPTY_RESPONSE") for p in guard.problems), (
        guard.report()
    )


def test_a_clean_page_leaves_the_guard_empty(browser_context: tuple[Any, PageGuard], site: str) -> None:
    context, guard = browser_context
    page = visit(context, f"{site}/chart.html")
    page.wait_for_function("() => window.Chart && Chart.getChart('payback') !== undefined")
    context.close()  # flushes events still in flight

    assert guard.problems == []


def test_axe_finds_an_inaccessible_page(browser_context: tuple[Any, PageGuard], site: str) -> None:
    context, _ = browser_context
    page = visit(context, f"{site}/inaccessible.html")

    found = {v.id: v for v in axe_violations(page)}
    assert {"button-name", "label", "html-has-lang", "document-title"} <= set(found)
    assert found["button-name"].impact == "critical"
    assert found["button-name"].targets == ["button"]
    with pytest.raises(AssertionError, match=r"button-name \(critical\): .* -> button"):
        assert_accessible(page)


def test_the_guard_on_flokit_under_gunicorn(browser_context: tuple[Any, PageGuard], flokit_server: Any) -> None:
    """The fixtures the dashboard's flows start from: a real FloKit, a guarded page. An HTTP error
    the page loads is a console error, so the guard flags it too."""
    context, guard = browser_context
    page = visit(context, f"{flokit_server.base}/healthz")
    assert json.loads(page.inner_text("body")) == {"status": "ok"}
    assert guard.problems == []

    visit(context, f"{flokit_server.base}/no-such-page")

    assert guard.problems == [
        "console error: Failed to load resource: the server responded with a status of 404 (NOT FOUND)"
        f" (at {flokit_server.base}/no-such-page)"
    ]


BAD_SUITE = """
def test_clean_page(page):
    page.goto("data:text/html,<title>ok</title><h1>ok</h1>")


def test_page_that_logs_an_error(page):
    page.goto("data:text/html,<title>x</title><script>console.error('harness: logged on purpose')</script>")


def test_that_fails_itself_on_a_page_that_threw(page):
    page.goto("data:text/html,<title>x</title><script>throw new Error('harness: thrown before the assert')</script>")
    assert page.title() == "not x"
"""


def test_the_page_fixture_fails_a_test_whose_page_logged_an_error(browser: Any, tmp_path: Path) -> None:
    """`browser` is requested only so that this test skips or fails as the others do without chromium."""
    result = child_pytest(tmp_path, BAD_SUITE, COLUMNS="200")
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "2 failed, 1 passed" in out, out
    assert "FAILED test_child.py::test_page_that_logs_an_error - Failed: the browser saw" in out, out
    assert "the browser saw 1 problem(s) a page must not have:\n  - console error: harness: logged on purpose" in out
    # A test that failed on its own keeps its assertion as the failure, with the page's problems beside it.
    assert "FAILED test_child.py::test_that_fails_itself_on_a_page_that_threw - AssertionError" in out, out
    assert "Captured browser call" in out and "  - page error: harness: thrown before the assert" in out, out
    assert "browser: chromium " in out and " launched once in " in out, out


@pytest.mark.parametrize(("required", "outcome"), [("", "1 skipped"), ("1", "1 error")])
def test_without_chromium_browser_tests_skip_unless_required(tmp_path: Path, required: str, outcome: str) -> None:
    result = child_pytest(
        tmp_path,
        "def test_needs_a_page(page):\n    pass\n",
        FLOKIT_CHROMIUM=str(tmp_path / "no-chromium-here"),
        FLOKIT_TEST_REQUIRE_BROWSER=required,
    )
    out = result.stdout + result.stderr

    assert f" {outcome} in " in out, out
    assert f"FLOKIT_CHROMIUM={tmp_path / 'no-chromium-here'} is not an executable" in out, out
