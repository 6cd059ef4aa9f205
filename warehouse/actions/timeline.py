"""An action's whole history in one list: transitions, evaluations and the executor's writes.

The v1 detail and the dashboard's detail page both show this, in this order; keeping the merge
here means the two can never disagree on what happened when. Beside it, where an action would be
applied (the ad accounts holding its campaigns), which the dashboard's dialogs state.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from warehouse.actions import executions
from warehouse.actions import repository as repo
from warehouse.adaccounts.repository import workspace_entities

TimelineEntry = repo.TransitionRecord | repo.EvaluationRecord | executions.Execution


def timeline(conn: Connection, *, workspace_id: str, action_id: str) -> list[TimelineEntry]:
    """Oldest first; a write is placed at its latest state's time, after an evaluation of the same
    instant (the preflight before it)."""
    steps = repo.history(conn, workspace_id=workspace_id, action_id=action_id)
    writes = executions.executions(conn, action_id=action_id)
    timed: list[tuple[object, int, TimelineEntry]] = [(s.created_at, i, s) for i, s in enumerate(steps)]
    timed += [(w.updated_at, len(steps) + i, w) for i, w in enumerate(writes)]
    return [entry for _at, _i, entry in sorted(timed, key=lambda t: (t[0], t[1]))]


def ad_accounts_by_campaign(conn: Connection, *, workspace_id: str) -> dict[str, set[str]]:
    """For each report campaign, the names of the live ad accounts whose registry holds it: where
    the executor would apply an action about that campaign. Read once per page, not per action."""
    found: dict[str, set[str]] = {}
    for account, entity in workspace_entities(conn, workspace_id=workspace_id):
        if entity.report_campaign is not None:
            found.setdefault(entity.report_campaign, set()).add(account.name)
    return found
