"""The payment processor can be connected (its notifications are processed) before its sync
exists: a check or a sync then fails with a sentence the operator can act on, not a crash."""

from __future__ import annotations

import pytest

from orchestration.syncs.connectors import connector_for
from transforms.integrations.errors import SyncFailure


def test_the_payment_processor_sync_is_refused_clearly_until_it_is_built() -> None:
    with pytest.raises(SyncFailure) as failure:
        connector_for("payment_processor")
    assert "not built yet" in failure.value.message and not failure.value.refused
