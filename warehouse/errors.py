"""What a repository function raises when the request cannot be carried out as asked.

Repositories raise these and nothing else for expected refusals; `api/errors.py` maps each
class once to the v1 and gateway error shapes, and the CLI prints its message. A route never
catches its own not-found.
"""

from __future__ import annotations


class WarehouseError(Exception):
    """A refusal the caller can act on; the message is safe to show to the client."""


class NotFound(WarehouseError, LookupError):
    """No such thing in this workspace (another workspace's thing is not found either)."""


class Conflict(WarehouseError):
    """The thing exists but its current state does not allow the change."""


class AlreadyExists(Conflict):
    """A thing with the same unique key is already there."""


class TransitionRefused(Conflict):
    """A state machine refused the change from the thing's current `status` (which it names)."""

    def __init__(self, message: str, status: str) -> None:
        super().__init__(message)
        self.status = status
