"""Is FloKit's Dagster code location loaded? Asked of the webserver, which loads it like the daemon.

A code location that fails to load leaves the webserver and the daemon running with nothing to
run: no sensor ticks, no schedules, no reports, and nothing but a red badge in the UI says so.
`flokit up` therefore asks the webserver's GraphQL API (`workspaceOrError`) after start until
the location has loaded, and stops everything, naming the location and its error, when it did
not load or not within the time allowed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import requests

from cli.supervisor import log

LOCATION = "flokit"  # workspace.yaml's location_name
# The webserver and a code server start in about 20 s on an idle 2-core machine; allow for a busy one.
LOAD_TIMEOUT_S = 300.0
QUERY = """
{
  workspaceOrError {
    __typename
    ... on Workspace {
      locationEntries {
        name
        loadStatus
        locationOrLoadError { __typename ... on PythonError { message causes { message } } }
      }
    }
    ... on PythonError { message }
  }
}
"""


@dataclass(frozen=True)
class LocationState:
    """`loaded`: the webserver finished loading it; `error`: why it failed, None when it did not."""

    loaded: bool
    error: str | None = None


def location_state(answer: dict[str, Any], location: str) -> LocationState:
    """Read a `workspaceOrError` answer. A location still loading, or not listed yet, is not loaded."""
    workspace = (answer.get("data") or {}).get("workspaceOrError") or {}
    if answer.get("errors"):
        return LocationState(True, f"the webserver could not answer: {answer['errors']}")
    if workspace.get("__typename") == "PythonError":
        return LocationState(True, f"the workspace did not load: {workspace.get('message', '').strip()}")
    for entry in workspace.get("locationEntries") or []:
        if entry.get("name") != location:
            continue
        if entry.get("loadStatus") != "LOADED":
            return LocationState(False)
        result = entry.get("locationOrLoadError") or {}
        if result.get("__typename") == "PythonError":
            return LocationState(True, _python_error(result))
        return LocationState(True)
    return LocationState(False)


def _python_error(error: dict[str, Any]) -> str:
    """The error and its causes on one line each, innermost last: Dagster wraps the user's
    exception ("Error occurred during the loading of Dagster definitions") around what went wrong."""
    lines = [error.get("message", "").strip() or "unknown error"]
    lines += [f"caused by: {cause.get('message', '').strip()}" for cause in error.get("causes") or []]
    return "\n  ".join(lines)


def ask(base_url: str, location: str, timeout_s: float = 5.0) -> LocationState:
    """The location's state as the webserver at `base_url` reports it now."""
    answer = requests.post(f"{base_url}/graphql", json={"query": QUERY}, timeout=timeout_s)
    answer.raise_for_status()
    return location_state(answer.json(), location)


class LocationWatch:
    """A supervisor check: polls the webserver once a second until the location loaded.

    Returns the reason to stop everything when it failed to load or did not load within
    `timeout_s` of `started_at`; None otherwise (a webserver not answering yet is waited for).
    """

    def __init__(
        self,
        base_url: str,
        location: str = LOCATION,
        timeout_s: float = LOAD_TIMEOUT_S,
        started_at: float | None = None,
    ) -> None:
        self.base_url = base_url
        self.location = location
        self.timeout_s = timeout_s
        self.started_at = time.monotonic() if started_at is None else started_at
        self.done = False
        self.next_poll = 0.0
        self.last_problem = "the Dagster webserver did not answer"

    def __call__(self, now: float) -> str | None:
        if self.done or now < self.next_poll:
            return None
        self.next_poll = now + 1.0
        try:
            state = ask(self.base_url, self.location)
        except (requests.RequestException, ValueError) as exc:
            state = LocationState(False)
            self.last_problem = f"the Dagster webserver did not answer ({type(exc).__name__})"
        else:
            self.last_problem = f"code location {self.location} was still loading"
        if state.loaded:
            self.done = True
            if state.error:
                return f"code location {self.location} failed to load: {state.error}"
            log(f"code location {self.location} loaded, {now - self.started_at:.1f} s after start")
            return None
        if now - self.started_at > self.timeout_s:
            self.done = True
            return f"code location {self.location} did not load within {self.timeout_s:.0f} s: {self.last_problem}"
        return None
