"""Every integration type the spec names can be connected and synced: each has a connector."""

from orchestration.syncs.connectors import connector_for
from transforms.integrations.kinds import INTEGRATION_TYPES


def test_every_integration_type_has_its_connector() -> None:
    assert len(INTEGRATION_TYPES) == 8
    for integration_type in INTEGRATION_TYPES:
        connector = connector_for(integration_type)
        assert connector.type == integration_type
