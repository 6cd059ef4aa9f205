"""The signing keys' state: the root, the current intermediate, rotation, the published set.

Every API host signs with the same keys because they live in the operational database (sealed
with the instance key, purpose "entitlement-signing-keys", the kid as context), not in a host's
files. An API process keeps the unsealed intermediate in memory (api/gateway/trusted.py); this
module is what it reads when its copy is stale.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

import sqlalchemy as sa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from sqlalchemy.engine import Connection, Row

from transforms import sealing, trusted
from warehouse.db import utcnow
from warehouse.signing.tables import signing_keys

SEAL_PURPOSE: Final = "entitlement-signing-keys"
ROOT_GENERATION: Final = 1

# Why 90 days: an intermediate's private key is online (unsealed in every API process), the
# root's is only read to certify a new intermediate. The expiry is the limit of what a leaked
# intermediate can vouch for (the verifier refuses a signature time past it), so shorter is
# safer; but an answer an app cached stays verifiable only while its signature time is before the
# expiry of the key that signed it, which never changes, and each new intermediate is one more
# key in the JWKS a server-side verifier must know. 90 days bounds a leak to one quarter while
# the first signer replaces an expired key on its own, so nobody has to remember to rotate.
INTERMEDIATE_LIFETIME: Final = timedelta(days=90)


class SigningKeysMissing(LookupError):
    """No root key yet: `flokit db upgrade` creates it (with the instance key)."""


@dataclass(frozen=True)
class PublicKey:
    kid: str
    role: str
    public_key: bytes
    expires_at: datetime | None


@dataclass(frozen=True)
class Signer:
    """An intermediate ready to sign: the private key object (parsed once), its kid, its
    chain (the `X-Signature-Intermediate` header's bytes) and its expiry."""

    kid: str
    generation: int
    private_key: Ed25519PrivateKey
    chain: bytes
    expires_at: datetime


def _raw_private(key: Ed25519PrivateKey) -> bytes:
    return key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _open(instance_key: str, row: Row[Any]) -> Ed25519PrivateKey:
    """The row's private key; `sealing.SealError` under another instance key."""
    raw = sealing.unseal(instance_key, SEAL_PURPOSE, row.private_key, context=row.kid)
    return Ed25519PrivateKey.from_private_bytes(raw)


def _insert(
    conn: Connection,
    *,
    instance_key: str,
    key: Ed25519PrivateKey,
    role: str,
    generation: int,
    now: datetime,
    chain: bytes | None = None,
    expires_at: datetime | None = None,
) -> bool:
    """Insert a key unless another row took (role, generation) first; whether this one won."""
    public = trusted.raw_public(key)
    kid = trusted.kid(public)
    try:
        with conn.begin_nested():
            conn.execute(
                signing_keys.insert().values(
                    kid=kid,
                    role=role,
                    generation=generation,
                    public_key=trusted.b64url(public),
                    private_key=sealing.seal(instance_key, SEAL_PURPOSE, _raw_private(key), context=kid),
                    chain=base64.b64encode(chain).decode() if chain is not None else None,
                    expires_at=expires_at,
                    created_at=now,
                )
            )
    except sa.exc.IntegrityError:
        return False
    return True


def _root_row(conn: Connection) -> Row[Any] | None:
    t = signing_keys
    return conn.execute(t.select().where(t.c.role == "root", t.c.generation == ROOT_GENERATION)).first()


def ensure_root(conn: Connection, *, instance_key: str, now: datetime | None = None) -> tuple[PublicKey, bool]:
    """The root key, created when absent (`flokit db upgrade`); (key, created). Two upgrades at
    once race on (role, generation): the loser reads the winner's key."""
    row = _root_row(conn)
    created = False
    if row is None:
        created = _insert(
            conn,
            instance_key=instance_key,
            key=Ed25519PrivateKey.generate(),
            role="root",
            generation=ROOT_GENERATION,
            now=now or utcnow(),
        )
        row = _root_row(conn)
        assert row is not None
    return _public(row), created


def root(conn: Connection) -> PublicKey | None:
    row = _root_row(conn)
    return _public(row) if row is not None else None


def _public(row: Row[Any]) -> PublicKey:
    return PublicKey(kid=row.kid, role=row.role, public_key=_b64url_decode(row.public_key), expires_at=row.expires_at)


def _latest_intermediate(conn: Connection) -> Row[Any] | None:
    t = signing_keys
    return conn.execute(t.select().where(t.c.role == "intermediate").order_by(t.c.generation.desc()).limit(1)).first()


def _signer(instance_key: str, row: Row[Any]) -> Signer:
    return Signer(
        kid=row.kid,
        generation=row.generation,
        private_key=_open(instance_key, row),
        chain=base64.b64decode(row.chain),
        expires_at=row.expires_at,
    )


def current_intermediate(conn: Connection, *, instance_key: str, now: datetime) -> Signer | None:
    """The newest intermediate while it has not expired; None when there is none or it has
    (the caller then creates the next one with `next_intermediate`)."""
    row = _latest_intermediate(conn)
    if row is None or row.expires_at <= now:
        return None
    return _signer(instance_key, row)


def latest_generation(conn: Connection) -> int:
    row = _latest_intermediate(conn)
    return row.generation if row is not None else 0


def next_intermediate(conn: Connection, *, instance_key: str, after: int, now: datetime | None = None) -> Signer:
    """Certify a new intermediate as generation `after` + 1 and return the current one.

    The conditional insert: when another host (or a rotation) already wrote that generation,
    its key is the current one and is returned instead, so a race never leaves two current
    keys. Raises SigningKeysMissing without a root."""
    now = now or utcnow()
    root_row = _root_row(conn)
    if root_row is None:
        raise SigningKeysMissing("no root signing key: run `flokit db upgrade`")
    root_key = _open(instance_key, root_row)
    key = Ed25519PrivateKey.generate()
    expires_at = (now + INTERMEDIATE_LIFETIME).replace(microsecond=0)
    chain = trusted.certify(root_key, trusted.raw_public(key), int(expires_at.timestamp()))
    _insert(
        conn,
        instance_key=instance_key,
        key=key,
        role="intermediate",
        generation=after + 1,
        now=now,
        chain=chain,
        expires_at=expires_at,
    )
    row = _latest_intermediate(conn)
    assert row is not None
    return _signer(instance_key, row)


def signer(conn: Connection, *, instance_key: str, now: datetime | None = None) -> Signer:
    """The intermediate to sign with now, created on demand when missing or expired."""
    now = now or utcnow()
    found = current_intermediate(conn, instance_key=instance_key, now=now)
    if found is not None:
        return found
    return next_intermediate(conn, instance_key=instance_key, after=latest_generation(conn), now=now)


def rotate(conn: Connection, *, instance_key: str, now: datetime | None = None) -> Signer:
    """A new current intermediate; the previous ones stay published until they expire, so
    answers they signed keep verifying."""
    return next_intermediate(conn, instance_key=instance_key, after=latest_generation(conn), now=now)


def published(conn: Connection, *, now: datetime) -> list[PublicKey]:
    """The root, then the intermediates that have not expired, newest first (the JWKS)."""
    t = signing_keys
    rows = conn.execute(
        t.select()
        .where(sa.or_(t.c.role == "root", t.c.expires_at > now))
        .order_by(t.c.role.desc(), t.c.generation.desc())
    )
    return [_public(r) for r in rows]
