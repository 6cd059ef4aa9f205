"""The Apple Search Ads client over `requests` against a fake Campaign Management API v5 and
token endpoint on 127.0.0.1: the ES256 client secret the fake verifies, the token cached, every
page, budgets in minor units, absolute writes read back, an operator's edit seen, 429 and 401."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from clients.ad_platform import Retrier
from clients.apple_search_ads import AppleSearchAdsClient
from tests.providers.apple_search_ads_fake import (
    CLIENT_ID,
    KEY_ID,
    ORG_ID,
    TEAM_ID,
    AppleSearchAdsFake,
    new_private_key,
)
from transforms.adaccounts.kinds import validate_config
from transforms.client_errors import AuthFailed, RateLimited

KEY, PEM = new_private_key()


@pytest.fixture
def fake() -> Iterator[AppleSearchAdsFake]:
    fake = AppleSearchAdsFake(public_key=KEY.public_key())
    brand = fake.add_campaign("asa_brand", "500")
    fake.add_campaign("asa_generic", "120.50")
    fake.add_campaign("asa_competitor", "80", status="PAUSED")
    for name in ("asa_brand_exact", "asa_brand_broad", "asa_brand_discovery"):
        fake.add_ad_group(brand, name)
    with fake:
        yield fake


def config(fake: AppleSearchAdsFake, **extra: Any) -> Any:
    raw = {"client_id": CLIENT_ID, "team_id": TEAM_ID, "key_id": KEY_ID, "private_key": PEM, "org_id": ORG_ID,
           "base_url": fake.url, "token_url": fake.token_url, **extra}  # fmt: skip
    return validate_config("apple_search_ads", raw)


def client(fake: AppleSearchAdsFake, sleeps: list[float] | None = None, **extra: Any) -> AppleSearchAdsClient:
    return AppleSearchAdsClient(
        config(fake, **extra), retrier=Retrier(sleep=(sleeps if sleeps is not None else []).append)
    )


def test_every_campaign_and_ad_group_of_every_page_with_one_token(fake: AppleSearchAdsFake) -> None:
    asa = client(fake)
    assert asa.account().currency == "USD" and asa.account().external_account_id == str(ORG_ID)
    listed = asa.list_entities()
    by_name = {e.name: e for e in listed}
    assert len(listed) == 6
    assert by_name["asa_brand"].daily_budget == 50000 and by_name["asa_generic"].daily_budget == 12050
    assert by_name["asa_competitor"].status == "paused" and by_name["asa_brand"].status == "active"
    assert by_name["asa_brand_broad"].entity_type == "ad_group"
    assert by_name["asa_brand_broad"].parent_external_id == by_name["asa_brand"].external_id
    assert by_name["asa_brand_broad"].daily_budget is None and by_name["asa_brand"].edited_at is not None
    assert fake.tokens_issued == asa.tokens_fetched == 1  # cached until shortly before expires_in


def test_a_token_about_to_expire_is_renewed(fake: AppleSearchAdsFake) -> None:
    fake.token_lifetime_s = 30  # inside the client's one-minute margin: never reused
    asa = client(fake)
    asa.account()
    asa.account()
    assert fake.tokens_issued == 2


def test_a_budget_write_is_absolute_and_reads_back(fake: AppleSearchAdsFake) -> None:
    asa = client(fake)
    brand = next(e for e in asa.list_entities() if e.name == "asa_brand")
    asa.set_daily_budget("campaign", brand.external_id, 42000, "USD")
    path, body = fake.writes[-1]
    assert path == f"/api/v5/campaigns/{brand.external_id}"
    assert body == {"campaign": {"dailyBudgetAmount": {"amount": "420.00", "currency": "USD"}}}
    assert asa.read("campaign", brand.external_id).daily_budget == 42000
    group = next(e for e in asa.list_entities() if e.name == "asa_brand_exact")
    asa.set_status("ad_group", group.external_id, "paused", parent_external_id=brand.external_id)
    assert fake.writes[-1][1] == {"status": "PAUSED"}
    assert asa.read("ad_group", group.external_id, brand.external_id).status == "paused"


def test_an_operators_edit_behind_flokits_back_is_what_a_read_sees(fake: AppleSearchAdsFake) -> None:
    asa = client(fake)
    brand = next(e for e in asa.list_entities() if e.name == "asa_brand")
    fake.edit(int(brand.external_id), dailyBudgetAmount={"amount": "650", "currency": "USD"})
    live = asa.read("campaign", brand.external_id)
    assert live.daily_budget == 65000 and live.edited_at is not None and brand.edited_at is not None
    assert live.edited_at > brand.edited_at


def test_429_waits_the_retry_after_then_succeeds(fake: AppleSearchAdsFake) -> None:
    fake.rate_limited, fake.retry_after = 2, 7
    sleeps: list[float] = []
    assert client(fake, sleeps).account().currency == "USD"
    assert sleeps == [7.0, 7.0]


def test_a_retry_after_beyond_the_run_is_not_sat_out(fake: AppleSearchAdsFake) -> None:
    fake.rate_limited, fake.retry_after = 1, 3600
    with pytest.raises(RateLimited) as caught:
        client(fake).account()
    assert caught.value.retry_after == 3600 and "TOO_MANY_REQUESTS" in caught.value.message


def test_revoked_credentials_are_an_auth_error(fake: AppleSearchAdsFake) -> None:
    fake.revoked = True
    with pytest.raises(AuthFailed) as caught:
        client(fake).account()
    assert "invalid_client" in caught.value.message


def test_a_key_apple_does_not_know_is_refused_at_the_token(fake: AppleSearchAdsFake) -> None:
    _, other_pem = new_private_key()
    with pytest.raises(AuthFailed):
        client(fake, private_key=other_pem).account()
    assert fake.tokens_issued == 0
