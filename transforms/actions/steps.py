"""What the executor does with one leg, given the value it finds live: the engine's write rules,
pure, so a unit test checks them without a platform (docs/actions-engine.md "Executor").

A leg is written only over the value FloKit expects there. `leg_step` is the one rule for apply,
revert and the re-run of either: the live value already the target → skip (mark it verified,
nothing to write), the live value the one FloKit read (apply) or set (revert) → apply, anything
else → conflict: someone changed it behind FloKit's back and their value stands. The same rule
decides compensation (`before` written back only over FloKit's own `after`) and the paywall
gateway's offer tests, whose "value" is the published config version.
"""

from __future__ import annotations

from typing import Any, Literal

from transforms.actions.execution import Leg

Step = Literal["skip", "apply", "conflict"]


def leg_step(live: Any, before: Any, after: Any) -> Step:
    """Apply or revert one leg: `before` is the value the write replaces, `after` the one it sets."""
    if live == after:
        return "skip"
    if live == before:
        return "apply"
    return "conflict"


def compensation_step(live: Any, applied_after: Any) -> Literal["apply", "conflict"]:
    """Undo a verified leg of an abandoned apply only where the live value is still FloKit's."""
    return "apply" if live == applied_after else "conflict"


def preflight_refusal(leg: Leg, live: Any) -> str | None:
    """Why the action may not start on this leg (the live value is not the registry's), or None."""
    if live == leg.before:
        return None
    return (
        f"{leg.label or leg.object_id}: the live {leg.field} on {leg.platform} is {live}, not the "
        f"{leg.before} the registry synced; someone changed it since the engine read it"
    )


def apply_conflict(leg: Leg, live: Any, before: Any, after: Any) -> str:
    """The reason an apply stops on a leg whose live value is neither `before` nor `after`."""
    return (
        f"leg {leg.leg} ({leg.label or leg.object_id}): the live {leg.field} is {live}, neither the "
        f"{before} FloKit read nor the {after} it sets; someone else changed it"
    )


def revert_conflict(leg: Leg, live: Any) -> str:
    """The `guardrail.triggered` detail of a revert left alone (the live value is an operator's)."""
    return (
        f"Revert of {leg.label or leg.object_type + ' ' + leg.object_id} on {leg.platform} left alone: its live "
        f"{leg.field} is {live}, not the {leg.before} FloKit set, so someone changed it since; FloKit would have "
        f"written back {leg.after}"
    )


def offer_test_step(
    live_version: int, published_by: str | None, before_version: int, after_version: int, executor: str
) -> Step:
    """Publish an offer test's config on one app's paywall: skip when the test version is live and
    was the executor's own (a re-run), conflict when any other version than the one the plan was
    made on is live (an operator published since), else apply (publish the next version)."""
    if live_version == after_version and published_by == executor:
        return "skip"
    if live_version != before_version:
        return "conflict"
    return "apply"


def offer_finish_step(live_version: int | None, test_version: int) -> Literal["apply", "conflict"]:
    """End an offer test on one app: publish only over the test FloKit published, never over a
    version an operator published since (or a paywall no longer live)."""
    return "apply" if live_version == test_version else "conflict"


# The status an action must be in for the executor to run each kind of execution on it.
RUNS_FROM: dict[str, str] = {"apply": "approved", "revert": "rolled_back"}


def not_runnable(kind: Literal["apply", "revert"], status: str) -> str | None:
    """Why the executor leaves an action alone (a re-run asked for after it moved on), or None.

    Only an approved action is applied and only a rolled-back one reverted: the sensor may ask
    again for either after an operator moved it, and a second run must then write nothing."""
    wanted = RUNS_FROM[kind]
    return None if status == wanted else f"the action is {status}, not {wanted}"


def written(read_back: Any, after: Any) -> bool:
    """A write counts only when the platform reads back the value sent (a silent clamp or a
    rounding on its side is a failed leg, not a verified one)."""
    return bool(read_back == after)


def revert_result(failed_legs: list[int], conflict_legs: list[int]) -> Literal["incomplete", "conflict", "reverted"]:
    """How a revert ends: a failed leg leaves it incomplete (the platform still carries FloKit's
    change there, so the run fails and is retried); else a leg someone changed meanwhile is a
    conflict (their value stands); else every leg is back to its value before."""
    if failed_legs:
        return "incomplete"
    return "conflict" if conflict_legs else "reverted"
