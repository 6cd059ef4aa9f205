"""`signing_keys`: the Ed25519 keys that sign entitlement answers, shared by every API host.

One row per key: the `root` (generation 1, created by `flokit db upgrade`, pinned by apps) and the
`intermediate` keys it certified (`chain` holds the 100 bytes an answer carries). The private key
is sealed with the instance key (`transforms.sealing`, the kid as context). `(role, generation)`
is unique: the current intermediate is the highest generation, and two hosts creating "the next
one" at once race on that rule, so one row wins and there are never two current keys.
"""

from __future__ import annotations

from typing import Literal

import sqlalchemy as sa

from warehouse.db import UTCDateTime
from warehouse.tables import metadata, one_of

KeyRole = Literal["root", "intermediate"]
KEY_ROLES: tuple[KeyRole, ...] = ("root", "intermediate")

signing_keys = sa.Table(
    "signing_keys",
    metadata,
    sa.Column("kid", sa.String(64), primary_key=True),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("generation", sa.Integer, nullable=False),
    # base64url, no padding, of the raw 32-byte public key (the JWK's `x`).
    sa.Column("public_key", sa.String(64), nullable=False),
    sa.Column("private_key", sa.Text, nullable=False),
    # Intermediates: base64 of public key || expiry || root signature; NULL for the root.
    sa.Column("chain", sa.String(200), nullable=True),
    sa.Column("expires_at", UTCDateTime(), nullable=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.UniqueConstraint("role", "generation"),
    sa.CheckConstraint(one_of("role", KEY_ROLES), name="role"),
)
