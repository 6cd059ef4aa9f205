"""`flokit up`'s console as a newcomer sees it: the banner, the addresses and a line per run,
not Dagster's step events and warnings (those are in the log files under the data directory);
`--verbose` shows everything as well."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests

from tests.support import http_ok, wait_for
from tests.support.up import Up, assert_daemon_brings_the_demo_to_reports_and_catalog, flokit_up

pytestmark = pytest.mark.e2e

MAX_LINES = 60


def first_reports(up: Up) -> bool:
    """The demo workspace's payback report answers with rows (the daemon published the reports)."""
    key = re.search(r"api_key_read_write\s+(\S+)", up.output())
    if not key:
        return False
    today = datetime.now(UTC).date()
    query = {"start_date": (today - timedelta(days=90)).isoformat(), "end_date": today.isoformat()}
    try:
        r = requests.get(
            f"{up.api}/v1/reports/payback",
            params=query,
            headers={"Authorization": f"Bearer {key.group(1)}"},
            timeout=5,
        )
    except requests.RequestException:
        return False
    return r.status_code == 200 and len(r.json()["data"]) > 0


def sign_in_form(page: str) -> dict[str, str]:
    """The hidden fields of the sign-in link's page, as its Sign in button posts them."""
    fields = dict(re.findall(r'<input type="hidden" name="(csrf_token|token)" value="([^"]+)">', page))
    assert set(fields) == {"csrf_token", "token"}, page
    return fields


def test_the_console_is_quiet_until_the_first_reports(tmp_path: Path) -> None:
    with flokit_up(tmp_path / "data", bootstrap=True) as up:
        wait_for(lambda: first_reports(up), 600, "the first reports", up.process)
        # The first refresh ran before the servers (the demo queue); the daemon's first run follows.
        run_line = re.compile(r"flokit up: run \w{8} succeeded in [\d.]+ s: \S+")
        wait_for(lambda: run_line.search(up.output()), 300, "the daemon's first run", up.process)
        console = up.output()
        lines = console.splitlines()
        print(f"\n[console] {len(lines)} lines until the first reports:\n{console}")
        assert len(lines) <= MAX_LINES, console
        assert "Warning" not in console and "DEBUG" not in console, console
        assert "api_key_read_write" in console  # the keys banner
        assert up.api in console and up.ui in console and "/data/logs/" in console
        # The demo queue: the engine's proposals, worked on the sandbox before the servers started.
        assert "Demo queue: first refresh and walkthrough on the sandbox account" in console, console
        shown = dict(re.findall(r"^  (budget_shift|creative_pause|offer_test)\s+act_\w+\s+(\w+)$", console, re.M))
        assert shown == {"budget_shift": "running", "creative_pause": "rolled_back", "offer_test": "rejected"}
        key = re.search(r"api_key_read_write\s+(\S+)", console)
        assert key is not None
        listed = requests.get(
            f"{up.api}/v1/actions",
            params={"limit": 100},
            headers={"Authorization": f"Bearer {key.group(1)}"},
            timeout=5,
        ).json()["actions"]
        assert {"running", "rolled_back", "rejected"} <= {a["status"] for a in listed}
        # The printed dashboard link opens a page with a Sign in button (opening uses nothing: a
        # second tab opened it too); the button signs in once and shows that queue; pressing it
        # in the other tab, or opening the link again, is refused.
        link = re.search(r"^Dashboard \(one-time link\)\s+(http\S+)$", console, re.M)
        assert link is not None and link.group(1).startswith(f"{up.api}/dashboard/login?token="), console
        assert "open it, press Sign in; works once" in console
        with requests.Session() as browser, requests.Session() as other_tab:
            shown = [tab.get(link.group(1), timeout=10) for tab in (other_tab, browser)]
            assert all(r.status_code == 200 and ">Sign in</button>" in r.text for r in shown)
            forms = [sign_in_form(r.text) for r in shown]
            signed_in = browser.post(f"{up.api}/dashboard/login", data=forms[1], timeout=10)
            assert signed_in.status_code == 200 and signed_in.url == f"{up.api}/dashboard/actions"
            assert [r.status_code for r in signed_in.history] == [303, 302]
            assert all(a["id"] in signed_in.text for a in listed[:3])
            again = other_tab.post(f"{up.api}/dashboard/login", data=forms[0], timeout=10)
            assert again.status_code == 410 and "already used" in again.text
        assert requests.get(link.group(1), timeout=10).status_code == 410
        # The detail is kept, in one log file per child.
        assert "Listening at: " + up.api in up.log("api")
        assert "DEBUG" in up.log("dagster-daemon")  # the runs' step events
        assert "Serving dagster-webserver" in up.log("dagster-webserver")
        # Nobody ran `flokit refresh`: the catalog and the engine's queue are the daemon's too.
        assert_daemon_brings_the_demo_to_reports_and_catalog(up.api, key.group(1), up.data_dir)
    assert up.process.returncode == 0


def test_verbose_shows_the_servers_output_which_the_log_files_keep_too(up_data_dir: Path) -> None:
    with flokit_up(up_data_dir, "--verbose") as up:
        wait_for(http_ok(f"{up.api}/healthz"), 120, "API", up.process)
        up.wait_for_log("code location flokit loaded", 300)
        up.wait_for_log("Serving dagster-webserver on", 60)
        up.wait_for_log("dagster.daemon", 60)
        console = up.output()
    for child, detail in (
        ("api", "Listening at: " + up.api),
        ("dagster-webserver", "Serving dagster-webserver on"),
        ("dagster-daemon", "dagster.daemon"),
    ):
        assert detail in console, console[-3000:]
        assert detail in up.log(child), child
    assert "api (v1, gateway, ingest)" in console.lower()
    # A restart: the instance and the database are found as the first start left them.
    assert f"dagster instance {up_data_dir / 'dagster'}: at head" in console, console[:2000]
