"""`flokit admin actions policy ...`: show or change a workspace's growth-actions policy.

No flag shows the policy (the documented defaults while the workspace changed none); each flag
changes one threshold, and the whole policy is validated before anything is written (an error
names the field and its range, exit status 1, nothing saved). Conventions as
`flokit admin integrations`: `--json` prints one object, errors go to stderr.
"""

from __future__ import annotations

from typing import Any

import click

from cli.context import App, json_option, pass_app
from transforms.actions.policy import DEFAULT, FIELDS, PolicyProblem
from transforms.timefmt import iso_z
from warehouse.actions import policy as store
from warehouse.errors import NotFound

ACTOR = "cli"

# Flag → policy field (the flags are the issue's; `--max-new-actions` is the per-refresh cap).
_FLAGS: dict[str, str] = {
    "target_payback_days": "target_payback_days",
    "p_decision": "p_decision",
    "max_leg_change": "max_leg_change",
    "max_portfolio_change": "max_portfolio_change",
    "cooldown_days": "cooldown_days",
    "suppress_after_reject_days": "suppress_after_reject_days",
    "max_new_actions": "max_new_actions_per_refresh",
    "observation_days": "observation_days",
    "auto_rollback": "auto_rollback",
}


def _shown(stored: store.StoredPolicy) -> dict[str, Any]:
    return {
        "workspace_id": stored.workspace_id,
        "policy": stored.policy.to_dict(),
        "defaults": [name for name in FIELDS if getattr(stored.policy, name) == getattr(DEFAULT, name)],
        "updated_at": iso_z(stored.updated_at),
        "updated_by": stored.updated_by,
    }


def _human(stored: store.StoredPolicy) -> str:
    lines = [f"action policy of {stored.workspace_id}"]
    for name in FIELDS:
        value = getattr(stored.policy, name)
        text = ("on" if value else "off") if isinstance(value, bool) else str(value)
        lines.append(f"  {name:28} {text}{'  (default)' if value == getattr(DEFAULT, name) else ''}")
    if stored.updated_at is None:
        lines.append("  never changed: every value is the default")
    else:
        lines.append(f"  changed {iso_z(stored.updated_at)} by {stored.updated_by}")
    return "\n".join(lines)


@click.group()
def actions() -> None:
    """Growth actions: the per-workspace policy of the engine, executor and monitor."""


@actions.command("policy")
@click.option("--workspace", "workspace_id", required=True)
@click.option("--target-payback-days", type=int, help="Longest projected payback a budget shift may fund (180).")
@click.option("--p-decision", type=float, help="Posterior probability a proposal needs, in [0.5, 1) (0.95).")
@click.option("--max-leg-change", type=float, help="Largest change of one budget, fraction in (0, 1] (0.2).")
@click.option("--max-portfolio-change", type=float, help="Largest share of managed daily spend moved (0.1).")
@click.option("--cooldown-days", type=int, help="Days between FloKit changes on one entity (7).")
@click.option("--suppress-after-reject-days", type=int, help="Days a rejected proposal is not proposed again (14).")
@click.option("--max-new-actions", type=int, help="New actions per refresh at most (5).")
@click.option("--observation-days", type=int, help="Days a running action is watched before it completes (14).")
@click.option("--auto-rollback", type=click.Choice(["on", "off"]), help="Roll back on a breach, or only alert (on).")
@json_option
@pass_app
def policy(app: App, workspace_id: str, **flags: Any) -> None:
    """Show the policy; with flags, change those thresholds and show the result."""
    changes = {_FLAGS[flag]: value for flag, value in flags.items() if value is not None}
    if "auto_rollback" in changes:
        changes["auto_rollback"] = changes["auto_rollback"] == "on"
    try:
        if changes:
            with app.database.write() as conn:
                stored = store.change_policy(conn, workspace_id=workspace_id, changes=changes, actor=ACTOR)
        else:
            with app.database.read() as conn:
                stored = store.read_policy(conn, workspace_id=workspace_id)
    except (NotFound, PolicyProblem) as exc:
        app.fail(str(exc))
    app.emit(_shown(stored), _human(stored))
