"""Config validation: defaults filled, secrets apart, every error names its field."""

from __future__ import annotations

import pytest

from transforms.integrations.kinds import KINDS, ConfigProblem, secret_hint, validate_config


def test_defaults_and_secrets_are_separated() -> None:
    config = validate_config("attribution_provider_a", {"api_token": "tok-0123456789abcdef"})
    assert config.secrets == {"api_token": "tok-0123456789abcdef"}
    assert config.options == {"base_url": "https://automate.adjust.com", "lookback_days": 14, "currency": "USD"}


def test_every_kind_accepts_base_url_and_the_s3_kinds_its_boto_name() -> None:
    for kind in KINDS.values():
        assert "base_url" in {f.name for f in kind.all_fields()}
    raw = {"bucket": "b", "access_key_id": "AKIA0123456789", "secret_access_key": "s" * 40}
    config = validate_config("subscription_provider_b", {**raw, "endpoint_url": "http://127.0.0.1:9000/"})
    assert config.get("base_url") == "http://127.0.0.1:9000"
    with pytest.raises(ConfigProblem) as twice:
        validate_config("subscription_provider_b", {**raw, "endpoint_url": "http://a:1", "base_url": "http://b:2"})
    assert twice.value.field in ("base_url", "endpoint_url")


@pytest.mark.parametrize(
    ("raw", "field", "message"),
    [
        ({}, "api_token", "is required"),
        ({"api_token": 5}, "api_token", "must be a string"),
        ({"api_token": "t", "lookback_days": "14"}, "lookback_days", "must be an integer"),
        ({"api_token": "t", "lookback_days": 0}, "lookback_days", "between 1 and 90"),
        ({"api_token": "t", "base_url": "ftp://x"}, "base_url", "http(s) address"),
        ({"api_token": "t", "apitoken": "t"}, "apitoken", "unknown field"),
    ],
)
def test_an_invalid_config_names_the_field(raw: dict, field: str, message: str) -> None:
    with pytest.raises(ConfigProblem) as problem:
        validate_config("attribution_provider_a", raw)
    assert problem.value.field == field and message in problem.value.message


def test_grouped_fields_come_all_or_none() -> None:
    raw = {"bucket": "b", "access_key_id": "AKIA0123456789", "secret_access_key": "s" * 40}
    validate_config("warehouse", raw)
    with pytest.raises(ConfigProblem) as problem:
        validate_config("warehouse", {**raw, "snowflake_account": "acme"})
    assert problem.value.field == "snowflake_user"


def test_unknown_types_are_named() -> None:
    with pytest.raises(ConfigProblem, match="unknown integration type 'stripe'"):
        validate_config("stripe", {})


def test_a_hint_never_shows_more_than_four_characters_of_a_long_secret() -> None:
    assert secret_hint("sk_live_0123456789abcdef") == "…cdef"
    assert secret_hint("short") == "…"


def test_a_pem_key_is_taken_as_the_file_has_it() -> None:
    """A .p8 file ends with a newline; pasted whole, it is accepted (and kept without it)."""
    pem = "-----BEGIN PRIVATE KEY-----\nMIGTAgEAMBMG\n-----END PRIVATE KEY-----\n"
    config = validate_config(
        "ios_store_connect", {"issuer_id": "i", "key_id": "k", "private_key": pem, "app_id": "app_x"}
    )
    assert config.get("private_key") == pem.strip()
    with pytest.raises(ConfigProblem, match="private_key: must be a PEM key file's text"):
        validate_config("ios_store_connect", {"issuer_id": "i", "key_id": "k", "private_key": "abc", "app_id": "a"})
