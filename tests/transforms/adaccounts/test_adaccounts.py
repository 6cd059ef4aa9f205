"""The pure parts of the ad accounts on literal values: config validation, minor units both ways,
the mapping to report labels, and the sandbox's budgets from spend."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

import polars as pl
import pytest

from transforms.adaccounts import sandbox
from transforms.adaccounts.entities import PlatformEntity, map_labels
from transforms.adaccounts.kinds import ConfigProblem, validate_config
from transforms.adaccounts.money import InexactAmount, from_meta, major_text, to_meta, to_minor
from transforms.reports.schemas import SPEND_SCHEMA


def test_meta_config_defaults_and_secret_split() -> None:
    config = validate_config("meta", {"access_token": "EAAG" + "x" * 20, "ad_account_id": "act_42"})
    assert config.secrets == {"access_token": "EAAG" + "x" * 20}
    assert config.options == {
        "base_url": "https://graph.facebook.com",
        "ad_account_id": "act_42",
        "api_version": "v26.0",
    }


@pytest.mark.parametrize(
    ("platform", "raw", "field"),
    [
        ("meta", {"access_token": "t", "ad_account_id": "act_42", "api_version": "26"}, "api_version"),
        ("meta", {"access_token": "t", "ad_account_id": "act_42", "token": "x"}, "token"),
        ("apple_search_ads", {"client_id": "c", "team_id": "t", "key_id": "k", "org_id": "x1",
                              "private_key": "-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----"},
         "private_key"),
        ("sandbox", {"campaigns": [{"name": "a", "daily_budget": "1.005", "currency": "USD"}]},
         "campaigns[0].daily_budget"),
        ("sandbox", {"campaigns": [{"name": "a", "daily_budget": 1, "currency": "XXY"}]},
         "campaigns[0].currency"),
        ("sandbox", {"campaigns": [{"name": "a", "daily_budget": 1, "currency": "USD"}] * 2}, "campaigns[1].name"),
    ],
)  # fmt: skip
def test_an_invalid_config_names_the_field(platform: str, raw: dict, field: str) -> None:
    with pytest.raises(ConfigProblem) as caught:
        validate_config(platform, raw)
    assert caught.value.field == field


def test_minor_units_are_exact_both_ways() -> None:
    assert to_minor("120.50", "USD") == 12050 and to_minor("500", "JPY") == 500 and to_minor("1.234", "KWD") == 1234
    assert major_text(12050, "USD") == "120.50" and major_text(500, "JPY") == "500"
    assert from_meta(2000, "USD") == 2000 and from_meta(2000, "HUF") == 200000 and to_meta(200000, "HUF") == 2000
    with pytest.raises(InexactAmount):
        to_minor("0.001", "USD")
    with pytest.raises(InexactAmount):
        to_meta(200050, "HUF")  # 2000.50 forint: finer than Meta's whole-forint unit


def entity(entity_type: str, external_id: str, parent: str | None, name: str) -> PlatformEntity:
    return PlatformEntity(entity_type, external_id, parent, name, "active", None, "USD", None)


def test_labels_are_mapped_by_name_through_the_parent_chain() -> None:
    listed = [
        entity("campaign", "c1", None, "meta_broad"),
        entity("ad_set", "s1", "c1", "set"),
        entity("ad", "a1", "s1", "meta_broad_cr1"),
        entity("ad", "a2", "s1", "google_uac_cr1"),  # a creative label, but of another campaign
        entity("campaign", "c2", None, "Meta Broad"),  # case differs: not the same label
        entity("ad", "a3", "missing-parent", "meta_broad_cr1"),
    ]
    pairs = {("meta_broad", "meta_broad_cr1"), ("google_uac", "google_uac_cr1")}
    mapped = {e.external_id: (e.report_campaign, e.report_creative) for e in map_labels(listed, pairs)}
    assert mapped == {
        "c1": ("meta_broad", None), "s1": ("meta_broad", None), "a1": ("meta_broad", "meta_broad_cr1"),
        "a2": ("meta_broad", None), "c2": (None, None), "a3": (None, None),
    }  # fmt: skip


def test_the_sandbox_budget_is_the_mean_of_the_last_seven_days_with_spend() -> None:
    today = date(2026, 11, 24)
    rows = [
        ("ws_1", today - timedelta(days=d), "c", f"cr{d % 2}", "US", s, "EUR")
        for d, s in [(0, 10.0), (2, 20.0), (3, 30.0), (5, 40.0), (6, 50.0), (9, 60.0), (12, 70.0), (20, 1000.0)]
    ]
    rows += [("ws_1", today - timedelta(days=1), "c", "cr0", "US", 0.0, "EUR"),  # no spend: not a day with spend
             ("ws_1", today - timedelta(days=30), "old", "x", "US", 5.0, "EUR"),
             ("ws_2", today, "c", "cr0", "US", 999.0, "EUR")]  # fmt: skip
    spend = pl.DataFrame(rows, schema=SPEND_SCHEMA, orient="row")
    [campaign] = sandbox.from_spend(spend, workspace_id="ws_1", today=today)
    assert campaign.name == "c" and campaign.currency == "EUR" and campaign.creatives == ("cr0", "cr1")
    assert campaign.daily_budget == Decimal(40)  # (10+20+30+40+50+60+70)/7 = 40; day 20 is the 8th
    [c, *ads] = sandbox.entities([campaign])
    assert (c.entity_type, c.daily_budget, c.currency) == ("campaign", 4000, "EUR")
    assert [a.name for a in ads] == ["cr0", "cr1"] and {a.parent_external_id for a in ads} == {c.external_id}
    assert sandbox.from_spend(spend, workspace_id="ws_3", today=today) == []
