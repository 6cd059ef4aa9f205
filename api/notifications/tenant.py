"""Whose notification it is, for the providers connected as integrations (Stripe, RevenueCat,
Adapty): the webhook URL names its integration (`?integration=int_…`), and the provider's own
credential is then checked against THAT integration's sealed secret. The id in the URL is not a
secret and proves nothing by itself: it only says which secret to check against, so a caller
who knows it still cannot post without the credential (ARCHITECTURE, tenant resolution)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs

from api.notifications.framework import Context, Incoming, ProcessorError, Unverified
from transforms.integrations.kinds import ValidConfig
from warehouse.errors import NotFound, TransitionRefused
from warehouse.integrations import repository as repo

QUERY_PARAMETER = "integration"


@dataclass(frozen=True)
class Tenant:
    integration_id: str
    workspace_id: str
    config: ValidConfig

    @property
    def app_id(self) -> str | None:
        value = self.config.get("app_id")
        return value if isinstance(value, str) and value else None


def query_value(query_string: str, name: str) -> str | None:
    """The one value of a query parameter; None when absent or given more than once."""
    values = parse_qs(query_string, keep_blank_values=False).get(name, [])
    return values[0] if len(values) == 1 else None


def integration_tenant(ctx: Context, *, integration_id: str | None, integration_type: str) -> Tenant:
    """The integration named in the URL with its config unsealed, or `Unverified`."""
    if not integration_id:
        raise Unverified(
            f"The webhook URL must name its integration: ?{QUERY_PARAMETER}=int_… "
            "(`flokit admin integrations list` shows the id)"
        )
    if ctx.settings.instance_key is None:
        raise ProcessorError("No instance key is configured: integration secrets cannot be read")
    try:
        with ctx.database.read() as conn:
            integration = repo.get_integration_for_operator(conn, integration_id=integration_id)
            if integration.type != integration_type:
                raise Unverified(f"Integration {integration_id} is not a {integration_type} integration")
            config = repo.config_of(conn, integration_id=integration_id, instance_key=ctx.settings.instance_key)
    except NotFound:
        raise Unverified(f"No integration {integration_id}") from None
    except TransitionRefused:
        raise Unverified(f"Integration {integration_id} is disconnected") from None
    return Tenant(integration_id, integration.workspace_id, config)


def tenant_of(incoming: Incoming, ctx: Context, integration_type: str) -> Tenant:
    return integration_tenant(
        ctx, integration_id=query_value(incoming.query_string, QUERY_PARAMETER), integration_type=integration_type
    )
