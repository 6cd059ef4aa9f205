"""The order pytest-xdist hands modules to the workers in (`--dist loadscope`, `make test`).

xdist's loadscope hands out whole modules, the ones with the most tests first; modules with as
many tests keep the collection's order. On this suite that ends a run on the one- and two-test
modules, among them the longest of all: an e2e module with one test runs two to four minutes
(`flokit up`, a refresh, the daemon's sensors), where a unit module with one test runs in a
second. Runs 13 and 14 ended with one worker 70-80 s behind the other two, alone on
`test_actions_lifecycle`, while the cores went half idle.

So one tie is broken the other way: among modules with the same number of tests, those that
start processes or a browser (tests/e2e, tests/faults, tests/browser) go first. The run then
ends on short in-process modules, which fill the workers' last gaps evenly. Nothing else
changes: the most-tests-first order xdist chose stays (handing all the process-level modules
out first overloaded the cores: docs/testing.md, run 6).
"""

from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadScopeScheduling

LONG_ROOMS = ("tests/e2e/", "tests/faults/", "tests/browser/")


def unit_order(scope: str, tests: int) -> tuple[int, bool]:
    """Most tests first (xdist's own order), then the rooms whose tests are long."""
    return (-tests, not scope.startswith(LONG_ROOMS))


class LongModulesFirstAmongEquals(LoadScopeScheduling):
    """`LoadScopeScheduling` with its queue of modules sorted by `unit_order` before the first
    module is handed out (the sort is stable: the collection's order within a tie stays)."""

    def __init__(self, config: Any, log: Any = None) -> None:
        super().__init__(config, log)
        self._ordered = False

    def _assign_work_unit(self, node: Any) -> None:
        if not self._ordered:
            self._ordered = True
            units = sorted(self.workqueue.items(), key=lambda unit: unit_order(unit[0], len(unit[1])))
            self.workqueue.clear()
            self.workqueue.update(units)
        super()._assign_work_unit(node)
