"""`webhook_authorization` is a webhook's only credential, guessable online: at least 32 characters
of random text besides a scheme word, and nothing trivially repetitive."""

from __future__ import annotations

import secrets

import pytest

from transforms.integrations.kinds import ConfigProblem, validate_config

RC = {"api_key": "sk_rc_0123456789abcdef", "project_id": "proj1a2b3c4d", "app_id": "app_1"}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("x", "at least 32 characters"),
        ("Bearer rc-webhook-0123456789abcdef", "at least 32 characters of random text besides a scheme word"),
        ("Bearer " + "a" * 40, "trivially repetitive"),
        ("ab" * 20, "trivially repetitive"),
        ("abcdefghijklmnopqrstuvwxyz0123456789", "trivially repetitive"),
        ("0123456789abcdef" * 2, "trivially repetitive"),
    ],
)
def test_a_short_or_repetitive_value_is_refused_naming_the_field(value: str, message: str) -> None:
    with pytest.raises(ConfigProblem) as problem:
        validate_config("subscription_provider_a", RC | {"webhook_authorization": value})
    assert problem.value.field == "webhook_authorization" and message in problem.value.message


@pytest.mark.parametrize(
    "value",
    ["Bearer " + secrets.token_hex(16), secrets.token_urlsafe(24), "Basic " + secrets.token_urlsafe(32),
     "".join(secrets.choice("0123456789") for _ in range(32))],
    ids=["bearer-hex", "urlsafe", "basic-urlsafe", "digits"],  # fixed ids: every xdist worker collects the same tests
)  # fmt: skip
def test_random_values_are_accepted_with_or_without_a_scheme(value: str) -> None:
    config = validate_config("subscription_provider_a", RC | {"webhook_authorization": value})
    assert config.secrets["webhook_authorization"] == value
