"""The Meta client through Meta's own SDK against a fake Graph API on 127.0.0.1: every page, the
budgets in minor units both ways, absolute writes read back, an operator's edit seen, and Meta's
errors classified (190 auth, 17 rate limit with the header's wait, 429)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from clients.ad_platform import Retrier
from clients.meta import MetaClient
from tests.providers.meta_graph_fake import ACCOUNT, TOKEN, MetaGraphFake
from transforms.adaccounts.kinds import validate_config
from transforms.client_errors import AuthFailed, RateLimited


@pytest.fixture
def fake() -> Iterator[MetaGraphFake]:
    fake = MetaGraphFake()
    broad = fake.add("campaign", "meta_broad", daily_budget=50000)
    lookalike = fake.add("campaign", "meta_lookalike")  # budget on its ad sets
    for i in range(3):
        ad_set = fake.add("ad_set", f"lal_set_{i}", parent=lookalike, daily_budget=12000 + i)
        fake.add("ad", f"meta_lookalike_cr{i + 1}", parent=ad_set)
    broad_set = fake.add("ad_set", "broad_set", parent=broad)
    fake.add("ad", "meta_broad_cr1", parent=broad_set, status="PAUSED")
    with fake:
        yield fake


def client(fake: MetaGraphFake, *, token: str = TOKEN, sleeps: list[float] | None = None) -> MetaClient:
    config = validate_config("meta", {"access_token": token, "ad_account_id": ACCOUNT, "base_url": fake.url})
    return MetaClient(config, retrier=Retrier(sleep=(sleeps if sleeps is not None else []).append))


def test_every_object_of_every_page_with_budgets_in_minor_units(fake: MetaGraphFake) -> None:
    meta = client(fake)
    info = meta.account()
    assert (info.external_account_id, info.name, info.currency) == (ACCOUNT, "Acme Fitness US", "USD")
    listed = meta.list_entities()
    by_name = {e.name: e for e in listed}
    assert len(listed) == len(fake.objects) == 10
    assert by_name["meta_broad"].daily_budget == 50000 and by_name["meta_broad"].currency == "USD"
    assert by_name["meta_lookalike"].daily_budget is None  # no campaign budget: its ad sets carry it
    assert [by_name[f"lal_set_{i}"].daily_budget for i in range(3)] == [12000, 12001, 12002]
    assert by_name["lal_set_0"].parent_external_id == by_name["meta_lookalike"].external_id
    assert by_name["meta_broad_cr1"].status == "paused" and by_name["meta_lookalike_cr1"].status == "active"
    assert by_name["meta_broad_cr1"].entity_type == "ad" and by_name["meta_broad_cr1"].edited_at is not None
    # page_size 2: 2 campaigns fit one page; 4 ad sets and 4 ads take two pages each
    gets = [
        path for method, path in fake.requests if method == "GET" and path.endswith(("/campaigns", "/adsets", "/ads"))
    ]
    assert len(gets) == 1 + 2 + 2


def test_a_budget_write_is_absolute_and_reads_back(fake: MetaGraphFake) -> None:
    meta = client(fake)
    [broad] = [e for e in meta.list_entities() if e.name == "meta_broad"]
    meta.set_daily_budget("campaign", broad.external_id, 40000, "USD")
    meta.set_daily_budget("campaign", broad.external_id, 40000, "USD")  # a retried absolute write changes nothing
    assert fake.writes == [(broad.external_id, {"daily_budget": "40000"})] * 2
    assert meta.read("campaign", broad.external_id).daily_budget == 40000
    meta.set_status("campaign", broad.external_id, "paused")
    assert meta.read("campaign", broad.external_id).status == "paused"


def test_an_operators_edit_behind_flokits_back_is_what_a_read_sees(fake: MetaGraphFake) -> None:
    meta = client(fake)
    [broad] = [e for e in meta.list_entities() if e.name == "meta_broad"]
    fake.edit(broad.external_id, daily_budget=65000)
    live = meta.read("campaign", broad.external_id)
    assert live.daily_budget == 65000 and live.edited_at is not None and live.edited_at > broad.edited_at


def test_meta_offset_one_currencies_are_converted() -> None:
    with MetaGraphFake(currency="JPY") as fake:
        campaign = fake.add("campaign", "jp", daily_budget=5000)  # 5000 yen
        meta = client(fake)
        assert meta.read("campaign", campaign).daily_budget == 5000
    with MetaGraphFake(currency="HUF") as fake:  # Meta: offset 1; ISO: two decimals
        campaign = fake.add("campaign", "hu", daily_budget=30000)  # 30 000 forint
        meta = client(fake)
        assert meta.read("campaign", campaign).daily_budget == 3_000_000
        meta.set_daily_budget("campaign", campaign, 2_500_000, "HUF")
        assert fake.writes[-1] == (campaign, {"daily_budget": "25000"})


def test_a_revoked_token_is_an_auth_error(fake: MetaGraphFake) -> None:
    with pytest.raises(AuthFailed) as caught:
        client(fake, token="EAAG-revoked").account()
    assert caught.value.platform_code == "190" and "Error validating access token" in caught.value.message
    assert "EAAG-revoked" not in caught.value.message


def test_code_17_waits_what_the_usage_header_says_then_succeeds(fake: MetaGraphFake) -> None:
    fake.rate_limited, fake.regain_minutes = 2, 1
    sleeps: list[float] = []
    assert client(fake, sleeps=sleeps).account().currency == "USD"
    assert sleeps == [60.0, 60.0]  # estimated_time_to_regain_access: 1 minute


def test_a_wait_beyond_the_run_is_not_sat_out(fake: MetaGraphFake) -> None:
    fake.rate_limited, fake.regain_minutes = 1, 30
    with pytest.raises(RateLimited) as caught:
        client(fake).account()
    assert caught.value.retry_after == 1800 and caught.value.platform_code == "17"


def test_a_bare_429_backs_off_and_retries(fake: MetaGraphFake) -> None:
    fake.http_429 = 2
    sleeps: list[float] = []
    assert client(fake, sleeps=sleeps).account().currency == "USD"
    assert sleeps == [1.0, 2.0]
