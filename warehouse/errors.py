"""What a repository function raises when the request cannot be carried out as asked.

Repositories raise these and nothing else for expected refusals; `api/errors.py` maps each
class once to the v1 and gateway error shapes, and the CLI prints its message. A route never
catches its own not-found.

The named refusals below the bases belong to one repository each but live here, so a reader finds
every refusal in one file. Each keeps the builtin base its callers caught before (ValueError,
LookupError), so an `except ValueError` written against it still holds. `Invalid` has no status in
`api/errors.py`: every surface that can meet one catches it and answers in its own words.
`InvalidUrl` is the one refusal not here: the pure URL check in `transforms/webhooks/urls.py`
raises it, and transforms may not import warehouse.
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


class Invalid(WarehouseError, ValueError):
    """The values asked for are not acceptable (a malformed URL, CIDR or name); the message says why."""


class InvalidIngestConfig(Invalid):
    """An unknown vendor, a non-canonical event type or a malformed CIDR (`warehouse/ingest/repository.py`)."""


class UnknownApp(NotFound):
    """No such app, or it was revoked (`warehouse/paywalls/configs.py`)."""


class NotRedeliverable(Conflict, ValueError):
    """The named delivery is not one that failed for good on this endpoint (`redeliver` in the
    webhook lease queue). A Conflict, not a NotFound, so that the CLI's "no endpoint" answer,
    which catches NotFound first, is never given for a delivery that is merely missing."""


class NotTheBuyer(Conflict):
    """The purchase belongs to another user, or the store's buyer token names someone else
    (`warehouse/entitlements/ledger.py`); the gateway answers it 422."""
