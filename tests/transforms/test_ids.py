import re

import pytest

from transforms.ids import hash_api_key, new_api_key, new_id, new_publishable_key


def test_ids_are_prefixed_and_unique() -> None:
    ids = {new_id("act") for _ in range(1000)}
    assert len(ids) == 1000
    assert all(re.fullmatch(r"act_[a-z2-7]{26}", i) for i in ids)


def test_unknown_prefix_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown id prefix"):
        new_id("nope")


def test_deterministic_with_given_randomness() -> None:
    assert new_id("ws", b"\x00" * 16) == "ws_" + "a" * 26
    assert new_api_key(b"\x00" * 32).startswith("flk_aaaa")
    assert new_publishable_key(b"\x00" * 20).startswith("pk_aaaa")


def test_key_hash_is_sha256_hex() -> None:
    assert hash_api_key("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
