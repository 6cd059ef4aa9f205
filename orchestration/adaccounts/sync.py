"""The registry sync: read every object of an ad account, map it to the reports' labels, write it.

Per account: `syncing`; the platform's account (id, name, currency) and every object; the labels
the reports show (`warehouse.adaccounts.lake.report_labels`) mapped onto them by name
(`transforms.adaccounts.entities.map_labels`: the install events carry no platform ids); the
registry upserted, vanished objects marked removed; `connected`. A refusal of the credentials
puts the account in `error` and emits `integration.error`; a transient failure (rate limit
beyond the retries, 5xx, timeout) fails only this sync, and the registry keeps what it had.
The platform is called outside any database transaction, so a slow platform holds no lock.

Run by the CLI (`flokit admin ad-accounts sync`), by `flokit refresh` before the reports, and by
the Dagster job `ad_accounts_sync_job` (orchestration/adaccounts/jobs.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from clients.ad_platform import AdPlatformClient, Retrier
from clients.apple_search_ads import AppleSearchAdsClient
from clients.egress import Egress, check_config
from clients.meta import MetaClient
from orchestration.adaccounts.sandbox import SandboxClient
from transforms.adaccounts.entities import map_labels
from transforms.adaccounts.kinds import ConfigProblem, ValidConfig, kind_of
from transforms.client_errors import AuthFailed, ClientError, ConfigRefused
from warehouse.adaccounts import repository as repo
from warehouse.adaccounts.lake import report_labels
from warehouse.db import Database, utcnow
from warehouse.lake import Lake

ClientFactory = Callable[[repo.AdAccount, ValidConfig], AdPlatformClient]


@dataclass(frozen=True)
class SyncResult:
    ad_account_id: str
    platform: str
    status: str  # succeeded | failed
    counts: repo.SyncCounts | None = None
    mapped_campaigns: int = 0
    mapped_creatives: int = 0
    error_code: str | None = None
    message: str | None = None

    def summary(self) -> str:
        where = f"{self.ad_account_id} ({self.platform})"
        if self.counts is None:
            return f"{where}: sync failed, {self.error_code}: {self.message}"
        c = self.counts
        return (
            f"{where}: {c.listed} object(s) listed: {c.created} new, {c.updated} changed, {c.unchanged} unchanged, "
            f"{c.removed} no longer listed; {self.mapped_campaigns} campaign(s) and {self.mapped_creatives} "
            "creative(s) mapped to report labels"
        )


def client_for(
    database: Database,
    lake: Lake,
    account: repo.AdAccount,
    config: ValidConfig,
    *,
    now: datetime,
    retrier: Retrier | None = None,
) -> AdPlatformClient:
    """The platform's client; `ConfigRefused` when an address of the config is not one
    the egress policy allows now (`clients.egress`: checked at connect time and again here, as
    DNS may have changed)."""
    if account.platform != "sandbox":
        try:
            check_config(kind_of(account.platform).all_fields(), config, Egress.from_env())
        except ConfigProblem as problem:
            raise ConfigRefused(f"{account.platform}: {problem}") from None
    if account.platform == "meta":
        return MetaClient(config, retrier=retrier)
    if account.platform == "apple_search_ads":
        return AppleSearchAdsClient(config, retrier=retrier)
    if account.platform == "sandbox":
        return SandboxClient(database, lake, account, config, now)
    raise ValueError(f"no client for platform {account.platform!r}")


def sync_account(
    database: Database,
    lake: Lake,
    instance_key: str,
    ad_account_id: str,
    *,
    now: datetime | None = None,
    retrier: Retrier | None = None,
    log: Callable[[str], None] = lambda _line: None,
) -> SyncResult:
    now = now or utcnow()
    with database.write() as conn:
        account = repo.begin_sync(conn, ad_account_id=ad_account_id, now=now)
        config = repo.config_of(conn, ad_account_id=ad_account_id, instance_key=instance_key)
    try:
        client = client_for(database, lake, account, config, now=now, retrier=retrier or Retrier(log=log))
        info = client.account()
        listed = client.list_entities()
    except ClientError as error:
        with database.write() as conn:
            repo.finish_sync_failure(
                conn,
                ad_account_id=ad_account_id,
                message=error.message,
                refused=isinstance(error, AuthFailed),  # only refused credentials put an ad account in error
                error_code=error.code,
                now=now,
            )
        log(f"ad account {ad_account_id}: {error.code}: {error.message}")
        return SyncResult(account.id, account.platform, "failed", error_code=error.code, message=error.message)
    except BaseException as error:
        # A fault of ours: the account must not stay `syncing`; the error itself propagates.
        with database.write() as conn:
            repo.finish_sync_failure(
                conn, ad_account_id=ad_account_id, message=f"{type(error).__name__}: {error}", refused=False, now=now
            )
        raise
    pairs, campaigns = report_labels(lake, workspace_id=account.workspace_id, today=now.date())
    mapped = map_labels(listed, pairs, campaigns)
    with database.write() as conn:
        counts = repo.finish_sync_success(conn, ad_account_id=ad_account_id, info=info, listed=mapped, now=now)
    result = SyncResult(
        account.id,
        account.platform,
        "succeeded",
        counts=counts,
        mapped_campaigns=sum(1 for e in mapped if e.entity_type == "campaign" and e.report_campaign),
        mapped_creatives=sum(1 for e in mapped if e.report_creative),
    )
    log(result.summary())
    return result


def sync_accounts(
    database: Database,
    lake: Lake,
    instance_key: str,
    *,
    workspace_id: str | None = None,
    ad_account_id: str | None = None,
    now: datetime | None = None,
    retrier: Retrier | None = None,
    log: Callable[[str], None] = lambda _line: None,
) -> list[SyncResult]:
    """Sync one account, or every live account (of one workspace, or of all)."""
    with database.read() as conn:
        if ad_account_id is not None and workspace_id is not None:
            ids = [repo.get_account(conn, ad_account_id=ad_account_id, workspace_id=workspace_id).id]
        elif ad_account_id is not None:
            ids = [repo.get_account_for_operator(conn, ad_account_id=ad_account_id).id]
        elif workspace_id is not None:
            ids = [a.id for a in repo.live_accounts(conn, workspace_id=workspace_id)]
        else:
            ids = [a.id for a in repo.live_accounts_for_operator(conn)]
    return [sync_account(database, lake, instance_key, i, now=now, retrier=retrier, log=log) for i in ids]
