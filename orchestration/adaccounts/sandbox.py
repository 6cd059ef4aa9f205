"""The `sandbox` platform: an ad account whose "platform" is FloKit's own registry.

It calls nothing. Its objects are the config's campaigns, or the workspace's own delivered spend
(`transforms.adaccounts.sandbox`); once synced they live in `ad_entities` under the sandbox
account, and the executor's writes (`set_daily_budget`, `set_status`) change those rows and
nothing else. A later sync keeps what was set (the registry is the platform's state) and only
adds the objects that appeared since. Every listing labels it `sandbox`.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from clients.ad_platform import LiveStatus
from transforms.adaccounts import sandbox as objects
from transforms.adaccounts.entities import AccountInfo, PlatformEntity
from transforms.adaccounts.kinds import ValidConfig
from warehouse.adaccounts import repository as repo
from warehouse.adaccounts.lake import recent_spend
from warehouse.db import Database
from warehouse.lake import Lake
from warehouse.workspaces import get_workspace


class SandboxClient:
    platform = "sandbox"

    def __init__(
        self, database: Database, lake: Lake, account: repo.AdAccount, config: ValidConfig, now: datetime
    ) -> None:
        self.database = database
        self.lake = lake
        self.account_row = account
        self.config = config
        self.now = now
        self.source = "config" if config.options.get("campaigns") else "spend"

    def _declared(self) -> list[objects.SandboxCampaign]:
        if self.source == "config":
            return objects.from_config(list(self.config.options["campaigns"]))
        spend = recent_spend(self.lake, workspace_id=self.account_row.workspace_id, today=self.now.date())
        return objects.from_spend(spend, workspace_id=self.account_row.workspace_id, today=self.now.date())

    def list_entities(self) -> list[PlatformEntity]:
        seeds = objects.entities(self._declared())
        with self.database.read() as conn:
            held = {
                (e.entity_type, e.external_id): e.as_platform()
                for e in repo.entities(conn, ad_account_id=self.account_row.id, include_removed=True)
            }
        out = [held.get((s.entity_type, s.external_id), s) for s in seeds]
        listed = {(e.entity_type, e.external_id) for e in out}
        out += [e for key, e in held.items() if key not in listed]  # the sandbox deletes nothing
        return out

    def account(self) -> AccountInfo:
        currencies = Counter(e.currency for e in self.list_entities() if e.entity_type == "campaign" and e.currency)
        if currencies:
            currency = currencies.most_common(1)[0][0]
        else:
            with self.database.read() as conn:
                currency = get_workspace(conn, self.account_row.workspace_id).reporting_currency
        return AccountInfo(f"sandbox:{self.account_row.id}", self.account_row.name, currency)

    def read(self, entity_type: str, external_id: str, parent_external_id: str | None = None) -> PlatformEntity:
        with self.database.read() as conn:
            return repo.get_entity(
                conn, ad_account_id=self.account_row.id, entity_type=entity_type, external_id=external_id
            ).as_platform()

    def set_daily_budget(
        self, entity_type: str, external_id: str, amount: int, currency: str, parent_external_id: str | None = None
    ) -> None:
        current = self.read(entity_type, external_id)
        if current.daily_budget is None:
            raise ValueError(f"the sandbox {entity_type} {external_id} has no daily budget")
        if current.currency and current.currency != currency.upper():
            raise ValueError(f"the sandbox {entity_type} spends in {current.currency}, not {currency}")
        self._set(entity_type, external_id, daily_budget=amount)

    def set_status(
        self, entity_type: str, external_id: str, status: LiveStatus, parent_external_id: str | None = None
    ) -> None:
        self._set(entity_type, external_id, status=status)

    def _set(
        self, entity_type: str, external_id: str, *, daily_budget: int | None = None, status: str | None = None
    ) -> None:
        """The registry row is the sandbox's platform: a write is the object's new live state,
        edited now."""
        with self.database.write() as conn:
            repo.set_live_state(
                conn,
                ad_account_id=self.account_row.id,
                entity_type=entity_type,
                external_id=external_id,
                daily_budget=daily_budget,
                status=status,
                edited_at=self.now,
                now=self.now,
            )
