"""`flokit admin ad-accounts ...` as an operator runs it, through the real entry point, against the
fake platforms on 127.0.0.1: connect from a config file (secrets never printed again, config
errors name the field), list, sync (counts printed), the registry listed, remove; an auth failure
leaves the account in `error`; the sandbox is labelled as such everywhere; `flokit refresh` syncs
the live accounts before the reports."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from tests.providers.apple_search_ads_fake import (
    CLIENT_ID,
    KEY_ID,
    ORG_ID,
    TEAM_ID,
    AppleSearchAdsFake,
    new_private_key,
)
from tests.providers.meta_graph_fake import ACCOUNT, TOKEN, MetaGraphFake
from tests.support.cli import Ran, flokit_in_process
from transforms.reports.schemas import SPEND_SCHEMA
from warehouse.lake import LocalLake
from warehouse.reports.report_lake import write_spend_raw

pytestmark = pytest.mark.e2e


def flokit(env: dict[str, str], *args: str) -> Ran:
    return flokit_in_process(env, *args)


@pytest.fixture
def env(database_url: str, tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "FLOKIT_DATA_DIR": str(tmp_path / "data"), "FLOKIT_DATABASE_URL": database_url,
           "DAGSTER_HOME": str(tmp_path / "dagster")}  # fmt: skip
    env.pop("FLOKIT_SECRET_KEY", None)
    assert flokit(env, "db", "upgrade").returncode == 0  # creates the instance key
    return env


@pytest.fixture
def workspace_id(env: dict[str, str]) -> str:
    done = flokit(env, "admin", "bootstrap", "--name", "Acme", "--json")
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["workspace_id"])


@pytest.fixture
def meta() -> Iterator[MetaGraphFake]:
    fake = MetaGraphFake()
    broad = fake.add("campaign", "meta_broad", daily_budget=50000)
    ad_set = fake.add("ad_set", "broad_set", parent=broad)
    for i in range(3):
        fake.add("ad", f"meta_broad_cr{i + 1}", parent=ad_set)
    with fake:
        yield fake


def write(tmp_path: Path, name: str, config: object) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(config))
    return str(path)


def test_connect_list_sync_remove_a_meta_account(
    env: dict[str, str], workspace_id: str, tmp_path: Path, meta: MetaGraphFake
) -> None:
    lake = LocalLake(Path(env["FLOKIT_DATA_DIR"]) / "lake")
    today = datetime.now(UTC).date()
    write_spend_raw(lake, pl.DataFrame([{"workspace_id": workspace_id, "spend_date": today, "campaign": "meta_broad",
                                         "creative": "meta_broad_cr2", "country": "US", "spend": 120.0,
                                         "currency": "USD"}], schema=SPEND_SCHEMA))  # fmt: skip
    config = write(tmp_path, "meta.json", {"access_token": TOKEN, "ad_account_id": ACCOUNT, "base_url": meta.url})
    done = flokit(env, "admin", "ad-accounts", "connect", "--workspace", workspace_id, "--platform", "meta",
                  "--config", config, "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    connected = json.loads(done.stdout)
    account_id = connected["ad_account_id"]
    assert account_id.startswith("adacct_") and (connected["platform"], connected["status"]) == ("meta", "connected")
    assert connected["credentials"] == {"access_token": "…6789"} and connected["sandbox"] is False

    synced = flokit(env, "admin", "ad-accounts", "sync", "--workspace", workspace_id)
    assert synced.returncode == 0, synced.stderr
    assert f"{account_id} (meta): 5 object(s) listed: 5 new" in synced.stdout
    assert "1 campaign(s) and 1 creative(s) mapped to report labels" in synced.stdout

    listed = flokit(env, "admin", "ad-accounts", "list", "--workspace", workspace_id, "--entities", "--json")
    assert listed.returncode == 0, listed.stderr
    [item] = json.loads(listed.stdout)["ad_accounts"]
    assert (item["status"], item["currency"], item["external_account_id"], item["entities"]) == (
        "connected",
        "USD",
        ACCOUNT,
        5,
    )
    registry = {e["name"]: e for e in item["registry"]}
    assert registry["meta_broad"]["daily_budget"] == 50000 and registry["meta_broad"]["report_campaign"] == "meta_broad"
    assert registry["meta_broad_cr2"]["report_creative"] == "meta_broad_cr2"
    assert registry["meta_broad_cr1"]["report_creative"] is None
    human = flokit(env, "admin", "ad-accounts", "list", "--workspace", workspace_id)
    for out in (done.stdout, synced.stdout, listed.stdout, human.stdout):
        assert TOKEN not in out

    again = flokit(env, "admin", "ad-accounts", "connect", "--workspace", workspace_id, "--platform", "meta",
                   "--config", config)  # fmt: skip
    assert again.returncode == 1 and "remove it first" in again.stderr

    gone = flokit(env, "admin", "ad-accounts", "remove", "--workspace", workspace_id, "--id", account_id, "--json")
    assert gone.returncode == 0 and json.loads(gone.stdout)["status"] == "disconnected"
    assert json.loads(gone.stdout)["credentials"] == {}
    refused = flokit(env, "admin", "ad-accounts", "sync", "--workspace", workspace_id, "--id", account_id)
    assert refused.returncode == 1 and "disconnected" in refused.stderr


def test_an_auth_failure_leaves_the_account_in_error(env: dict[str, str], workspace_id: str, tmp_path: Path) -> None:
    key, pem = new_private_key()
    with AppleSearchAdsFake(public_key=key.public_key(), revoked=True) as fake:
        config = write(tmp_path, "asa.json", {
            "client_id": CLIENT_ID, "team_id": TEAM_ID, "key_id": KEY_ID, "private_key": pem, "org_id": ORG_ID,
            "base_url": fake.url, "token_url": fake.token_url,
        })  # fmt: skip
        done = flokit(env, "admin", "ad-accounts", "connect", "--workspace", workspace_id, "--platform",
                      "apple_search_ads", "--config", config, "--json")  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "BEGIN" not in done.stdout and pem.splitlines()[1] not in done.stdout
        assert json.loads(done.stdout)["credentials"] == {"private_key": "…----"}  # a PEM's tail tells nothing
        synced = flokit(env, "admin", "ad-accounts", "sync", "--workspace", workspace_id, "--json")
    assert synced.returncode == 1
    [result] = json.loads(synced.stdout)["syncs"]
    assert (result["status"], result["error_code"]) == ("failed", "auth") and "invalid_client" in result["message"]
    listed = flokit(env, "admin", "ad-accounts", "list", "--workspace", workspace_id)
    assert " error " in listed.stdout and "invalid_client" in listed.stdout


@pytest.mark.parametrize(
    ("platform", "config", "expected"),
    [
        (
            "meta",
            {"access_token": TOKEN, "ad_account_id": "1234"},
            "invalid config: ad_account_id: must be the Graph id",
        ),
        ("meta", {"ad_account_id": ACCOUNT}, "invalid config: access_token: is required"),
        (
            "apple_search_ads",
            {
                "client_id": "c",
                "team_id": "t",
                "key_id": "k",
                "org_id": 1,
                "private_key": "-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----",
            },
            "invalid config: private_key: is not a readable",
        ),
        (
            "sandbox",
            {"campaigns": [{"name": "x", "daily_budget": -1, "currency": "USD"}]},
            "invalid config: campaigns[0].daily_budget: must be a non-negative amount",
        ),
        (
            "sandbox",
            {"campaigns": [{"name": "x", "daily_budget": 1, "currency": "USD", "bid": 2}]},
            "invalid config: campaigns[0].bid: unknown field",
        ),
    ],
)
def test_an_invalid_config_is_refused_naming_the_field(
    env: dict[str, str], workspace_id: str, tmp_path: Path, platform: str, config: object, expected: str
) -> None:
    done = flokit(env, "admin", "ad-accounts", "connect", "--workspace", workspace_id, "--platform", platform,
                  "--config", write(tmp_path, "c.json", config))  # fmt: skip
    assert done.returncode == 1 and expected in done.stderr
    assert "no ad accounts" in flokit(env, "admin", "ad-accounts", "list", "--workspace", workspace_id).stdout


def test_the_sandbox_is_labelled_and_flokit_refresh_syncs_it(
    env: dict[str, str], workspace_id: str, tmp_path: Path
) -> None:
    config = write(tmp_path, "sandbox.json", {"campaigns": [
        {"name": "meta_broad", "daily_budget": 500, "currency": "USD", "creatives": ["meta_broad_cr1"]},
    ]})  # fmt: skip
    done = flokit(env, "admin", "ad-accounts", "connect", "--workspace", workspace_id, "--platform", "sandbox",
                  "--config", config)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "sandbox: changes apply only to FloKit's own records" in done.stdout

    refreshed = flokit(env, "refresh", "--json")
    assert refreshed.returncode == 0, refreshed.stderr
    assert "ad_accounts_sync" in [run["name"] for run in json.loads(refreshed.stdout)["runs"]]

    listed = flokit(env, "admin", "ad-accounts", "list", "--workspace", workspace_id, "--entities")
    assert "sandbox" in listed.stdout and "changes apply only to FloKit's own records" in listed.stdout
    assert "2 object(s)" in listed.stdout and "50000 USD" in listed.stdout
