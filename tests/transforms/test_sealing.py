"""Secrets at rest: what is sealed under one instance key, purpose and context opens only there."""

from __future__ import annotations

import secrets

import pytest

from transforms.sealing import SealError, derive_key, seal, unseal

KEY = secrets.token_urlsafe(32)


def test_a_sealed_secret_opens_with_its_key_purpose_and_context() -> None:
    sealed = seal(KEY, "integration-credentials", b'{"api_token": "tok_123"}', context="int_1")
    assert sealed.startswith("v1.") and "tok_123" not in sealed
    assert unseal(KEY, "integration-credentials", sealed, context="int_1") == b'{"api_token": "tok_123"}'


def test_sealing_twice_gives_two_values_that_both_open() -> None:
    first, second = (seal(KEY, "p", b"same") for _ in range(2))
    assert first != second  # a fresh nonce each time: equal secrets do not show as equal rows
    assert unseal(KEY, "p", first) == unseal(KEY, "p", second) == b"same"


@pytest.mark.parametrize(
    ("key", "purpose", "context"),
    [(secrets.token_urlsafe(32), "p", "c"), (KEY, "other-purpose", "c"), (KEY, "p", "another-row")],
    ids=["another instance key", "another purpose", "another row"],
)
def test_it_does_not_open_anywhere_else(key: str, purpose: str, context: str) -> None:
    sealed = seal(KEY, "p", b"secret", context="c")
    with pytest.raises(SealError):
        unseal(key, purpose, sealed, context=context)


def test_an_altered_or_foreign_value_is_refused() -> None:
    sealed = seal(KEY, "p", b"secret")
    flipped = sealed[:-2] + ("A" if sealed[-2] != "A" else "B") + sealed[-1]
    for bad in (flipped, "v0." + sealed[3:], "v1.", "v1.@@@", "plaintext"):
        with pytest.raises(SealError):
            unseal(KEY, "p", bad)


def test_purposes_get_independent_keys() -> None:
    """RFC 5869 test vectors aside, the property FloKit relies on: one key per purpose."""
    assert len(derive_key(KEY, "a")) == 32
    assert derive_key(KEY, "a") != derive_key(KEY, "b")
    assert derive_key(KEY, "a") == derive_key(KEY, "a")
