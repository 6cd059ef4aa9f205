"""The pure parts of signed entitlement answers: nonce syntax, the signed message, the chain, kids."""

import base64
import hashlib

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from transforms import trusted


@pytest.mark.parametrize(
    "nonce",
    [
        base64.b64encode(b"\x00" * 12).decode(),  # the shortest
        base64.b64encode(b"\xff" * 32).decode(),  # the longest
        base64.b64encode(b"\xfb" * 16).decode(),  # '+' and '/' of the standard alphabet
        base64.b64encode(b"a" * 13).decode().rstrip("="),  # padding optional
    ],
)
def test_standard_base64_of_12_to_32_bytes_is_accepted_as_sent(nonce: str) -> None:
    assert trusted.check_nonce(nonce) == nonce


@pytest.mark.parametrize(
    "nonce",
    [
        "",
        base64.b64encode(b"x" * 11).decode(),  # too short
        base64.b64encode(b"x" * 33).decode(),  # too long
        base64.urlsafe_b64encode(b"\xfb" * 16).decode(),  # URL alphabet
        base64.b64encode(b"x" * 16).decode() + "=",  # wrong padding
        base64.b64encode(b"x" * 16).decode()[:-3] + "=",  # padding where data belongs
        " " + base64.b64encode(b"x" * 16).decode(),
        "AAAAAAAAAAAAAAAAA",  # 17 characters: no byte length encodes to that
        "not base64 at all!!",
    ],
)
def test_anything_else_is_an_invalid_nonce(nonce: str) -> None:
    with pytest.raises(trusted.InvalidNonce):
        trusted.check_nonce(nonce)


def test_the_message_is_the_seven_lines_with_the_body_hash() -> None:
    body = b'{"active":true,"source":"iap"}\n'
    signed = trusted.message(
        nonce="n0nce==", method="GET", target="/api/x?a=1", user_id="user-7", time_ms="1700000000000", body=body
    )
    assert signed.decode().split("\n") == [
        "flokit-entitlement-v1",
        "n0nce==",
        "GET",
        "/api/x?a=1",
        "user-7",
        "1700000000000",
        hashlib.sha256(body).hexdigest(),
    ]


def test_rfc_8037_key_gives_the_rfc_7638_thumbprint_as_kid() -> None:
    # RFC 8037 Appendix A.1-A.3: the test key's d, x, and its thumbprint.
    d = base64.urlsafe_b64decode("nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A=")
    public = trusted.raw_public(Ed25519PrivateKey.from_private_bytes(d))
    assert trusted.b64url(public) == "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
    assert trusted.kid(public) == "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
    assert trusted.jwk(public) == {
        "kty": "OKP",
        "crv": "Ed25519",
        "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo",
        "kid": "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k",
        "alg": "Ed25519",
        "use": "sig",
    }


def test_a_chain_opens_only_with_the_root_that_signed_it() -> None:
    root, other, intermediate = (Ed25519PrivateKey.generate() for _ in range(3))
    public = trusted.raw_public(intermediate)
    chain = trusted.certify(root, public, 1_900_000_000)
    assert len(chain) == trusted.CHAIN_BYTES == 100
    assert chain[32:36] == (1_900_000_000).to_bytes(4, "big")
    assert trusted.open_chain(chain, trusted.raw_public(root)) == (public, 1_900_000_000)
    with pytest.raises(trusted.InvalidChain):
        trusted.open_chain(chain, trusted.raw_public(other))
    later = chain[:32] + (1_999_999_999).to_bytes(4, "big") + chain[36:]  # a stretched expiry
    with pytest.raises(trusted.InvalidChain):
        trusted.open_chain(later, trusted.raw_public(root))
    with pytest.raises(trusted.InvalidChain):
        trusted.open_chain(chain[:-1], trusted.raw_public(root))
