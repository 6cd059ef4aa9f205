"""`flokit admin actions policy` as an operator runs it: the defaults shown, flags changing and
showing, a bad value refused naming the field with nothing saved, an unknown workspace refused."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.cli import Ran, flokit_in_process

pytestmark = pytest.mark.e2e


def flokit(env: dict[str, str], *args: str) -> Ran:
    return flokit_in_process(env, *args)


@pytest.fixture
def env(database_url: str, tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "FLOKIT_DATA_DIR": str(tmp_path / "data"), "FLOKIT_DATABASE_URL": database_url}
    assert flokit(env, "db", "upgrade").returncode == 0
    return env


@pytest.fixture
def workspace_id(env: dict[str, str]) -> str:
    done = flokit(env, "admin", "bootstrap", "--name", "Acme", "--json")
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["workspace_id"])


def policy(env: dict[str, str], workspace_id: str, *flags: str) -> Ran:
    return flokit(env, "admin", "actions", "policy", "--workspace", workspace_id, *flags)


def test_show_change_and_show_again(env: dict[str, str], workspace_id: str) -> None:
    shown = policy(env, workspace_id, "--json")
    assert shown.returncode == 0, shown.stderr
    defaults = json.loads(shown.stdout)
    assert defaults["policy"] == {
        "target_payback_days": 180, "p_decision": 0.95, "max_leg_change": 0.2, "max_portfolio_change": 0.1,
        "cooldown_days": 7, "suppress_after_reject_days": 14, "max_new_actions_per_refresh": 5,
        "observation_days": 14, "auto_rollback": True,
    }  # fmt: skip
    assert defaults["updated_at"] is None and len(defaults["defaults"]) == 9
    human = policy(env, workspace_id)
    assert human.returncode == 0 and "never changed: every value is the default" in human.stdout
    assert "max_leg_change               0.2  (default)" in human.stdout

    changed = policy(
        env, workspace_id, "--max-leg-change", "0.15", "--auto-rollback", "off", "--max-new-actions", "3",
        "--target-payback-days", "120", "--json",
    )  # fmt: skip
    assert changed.returncode == 0, changed.stderr
    result = json.loads(changed.stdout)
    assert result["policy"]["max_leg_change"] == 0.15 and result["policy"]["auto_rollback"] is False
    assert result["policy"]["max_new_actions_per_refresh"] == 3 and result["policy"]["target_payback_days"] == 120
    assert result["updated_by"] == "cli" and result["updated_at"].endswith("Z")
    assert "max_leg_change" not in result["defaults"] and "cooldown_days" in result["defaults"]

    again = policy(env, workspace_id)  # a later read sees the stored policy
    assert again.returncode == 0
    assert "auto_rollback                off\n" in again.stdout and "target_payback_days          120\n" in again.stdout
    assert "changed " in again.stdout and " by cli" in again.stdout


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--p-decision", "1"), "p_decision: must be a probability in [0.5, 1), got 1.0"),
        (("--max-portfolio-change", "1.5"), "max_portfolio_change: must be a fraction in (0, 1]"),
        (("--observation-days", "0"), "observation_days: must be between 1 and 3650 days, got 0"),
        (("--max-new-actions", "0"), "max_new_actions_per_refresh: must be between 1 and 100, got 0"),
    ],
)
def test_a_bad_value_is_refused_naming_the_field_and_nothing_is_saved(
    env: dict[str, str], workspace_id: str, flags: tuple[str, ...], message: str
) -> None:
    refused = policy(env, workspace_id, "--cooldown-days", "3", *flags)
    assert refused.returncode == 1 and refused.stderr.startswith(f"error: {message}")
    as_json = policy(env, workspace_id, *flags, "--json")
    assert as_json.returncode == 1 and json.loads(as_json.stderr)["error"].startswith(message)
    shown = json.loads(policy(env, workspace_id, "--json").stdout)
    assert shown["updated_at"] is None and shown["policy"]["cooldown_days"] == 7


def test_an_unknown_workspace_and_a_bad_switch_are_refused(env: dict[str, str]) -> None:
    missing = policy(env, "ws_nope", "--json")
    assert missing.returncode == 1 and json.loads(missing.stderr) == {"error": "no workspace ws_nope"}
    bad = policy(env, "ws_nope", "--auto-rollback", "maybe")
    assert bad.returncode == 2 and "'maybe' is not one of 'on', 'off'" in bad.stderr
