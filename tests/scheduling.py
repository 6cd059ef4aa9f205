"""The order pytest-xdist hands modules to the workers in (`--dist loadscope`, `make test`).

xdist's loadscope hands out whole modules, the ones with the most tests first. On this suite that
ends a run on the one- and two-test modules, among them the longest of all: an e2e module with
one test runs two to three minutes (`flokit up`, refreshes, the daemon's sensors) where a unit
module with one test runs in a second. Runs 13 to 15 ended with one worker 70-120 s behind the
others, alone on `test_actions_lifecycle` or `test_up_console`, the cores half idle.

Handing the longest modules out first is the textbook answer (longest processing time first), but
putting every process-level module first was slower here (run 6, docs/testing.md): three workers
each waiting on a daemon's tick or a child's start leave the cores idle, where a worker running
in-process tests beside them fills them. So the queue is two lists merged in proportion:

- the modules that start processes or a browser (tests/e2e, tests/faults, tests/browser), longest
  first;
- every other module, longest first;

taking next from the list that has handed out the smaller share of its own total. Each worker
keeps a mix, the longest modules start early, and the run ends on short modules of both kinds.

How long a module takes is read from `module_seconds.json` beside this file (its wall time in the
last measured run: `python -m tests.scheduling <timeline file>` rewrites it from a run made with
FLOKIT_TEST_TIMELINE); a module not in it is estimated from its room's seconds per test.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from xdist.scheduler import LoadScopeScheduling

MEASURED = Path(__file__).with_name("module_seconds.json")
PROCESS_ROOMS = ("tests/e2e/", "tests/faults/", "tests/browser/")
# Seconds per test by room (run 15, three workers on two cores), for modules not yet measured.
PER_TEST_S = {"tests/e2e/": 11.0, "tests/browser/": 12.0, "tests/faults/": 15.0, "tests/orchestration/": 2.0,
              "tests/api/": 0.7, "tests/cli/": 0.6}  # fmt: skip
OTHER_PER_TEST_S = 0.3


def estimate(scope: str, tests: int, measured: Mapping[str, float]) -> float:
    module = scope.split("::", 1)[0]
    if module in measured:
        return measured[module]
    per_test = next((s for room, s in PER_TEST_S.items() if module.startswith(room)), OTHER_PER_TEST_S)
    return per_test * tests


def interleaved(units: Mapping[str, int], measured: Mapping[str, float]) -> list[str]:
    """The scopes (each with its number of tests) in the order to hand them out (module docstring)."""
    cost = {scope: estimate(scope, tests, measured) for scope, tests in units.items()}
    lists: list[list[str]] = [[], []]
    for scope in units:
        lists[0 if scope.startswith(PROCESS_ROOMS) else 1].append(scope)
    for scopes in lists:
        scopes.sort(key=lambda scope: -cost[scope])  # stable: the collection's order within a tie
    totals = [sum(cost[s] for s in scopes) or 1.0 for scopes in lists]
    handed = [0.0, 0.0]
    order = []
    while lists[0] or lists[1]:
        pick = 0 if lists[0] and (not lists[1] or handed[0] / totals[0] <= handed[1] / totals[1]) else 1
        scope = lists[pick].pop(0)
        handed[pick] += cost[scope]
        order.append(scope)
    return order


def read_measured() -> dict[str, float]:
    return json.loads(MEASURED.read_text()) if MEASURED.exists() else {}


class InterleavedLongestFirst(LoadScopeScheduling):
    """`LoadScopeScheduling` with its queue put in `interleaved` order before the first module is
    handed out; everything else (a module per worker at a time, two units ahead) is xdist's."""

    def __init__(self, config: Any, log: Any = None) -> None:
        super().__init__(config, log)
        self._ordered = False

    def _assign_work_unit(self, node: Any) -> None:
        if not self._ordered:
            self._ordered = True
            units = dict(self.workqueue)
            order = interleaved({scope: len(tests) for scope, tests in units.items()}, read_measured())
            self.workqueue.clear()
            self.workqueue.update((scope, units[scope]) for scope in order)
        super()._assign_work_unit(node)


def measured_from_timeline(lines: list[str]) -> dict[str, float]:
    """Each module's wall seconds (its tests' setup, call and teardown summed) from a timeline:
    `worker, start, end, [cpu, children cpu,] test id` per line (tests/conftest.py)."""
    seconds: dict[str, float] = defaultdict(float)
    for line in lines:
        fields = line.rstrip("\n").split("\t")
        seconds[fields[-1].split("::", 1)[0]] += float(fields[2]) - float(fields[1])
    return {module: round(s, 1) for module, s in sorted(seconds.items())}


if __name__ == "__main__":
    MEASURED.write_text(json.dumps(measured_from_timeline(Path(sys.argv[1]).read_text().splitlines()), indent=1) + "\n")
    print(f"{MEASURED}: {len(read_measured())} modules")
