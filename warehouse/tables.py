"""SQLAlchemy Core tables of the operational database.

Named constraints and indexes (so Alembic migrations can refer to them), portable types only
(SQLite and PostgreSQL), every row of tenant data carrying `workspace_id`. Later features add
their tables in their own modules (`warehouse/<domain>/tables.py`) that share this `metadata`,
and list the module in `warehouse.migrate.TABLE_MODULES` so Alembic compares all of them.

The column vocabulary is declared here once and imported by every table module: `IdString` for
every column holding one of our ids (`transforms.ids.ID_MAX_LENGTH`, the length the API models
accept too), `BigIntKey` for append-only surrogate keys, and `one_of` for the CHECK of a column
whose values are a vocabulary declared in code (the tuple is the declaration; the migration that
adds the CHECK spells the values out, frozen as they were then, and the drift test compares them).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import sqlalchemy as sa

from transforms.ids import ID_MAX_LENGTH
from warehouse.db import UTCDateTime

# Every column that holds one of our type-prefixed ids (`transforms.ids.new_id`).
IdString = sa.String(ID_MAX_LENGTH)

# SQLite only aliases ROWID (cheap monotonic keys) for a column declared exactly INTEGER.
BigIntKey = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

Scope = Literal["read_only", "read_write"]
SCOPES: tuple[Scope, ...] = ("read_only", "read_write")


def one_of(column: str, values: Iterable[str]) -> str:
    """The CHECK text `column IN ('a', 'b')` for a vocabulary, in the order it is declared
    (the migrations write the same text, so SQLite stores it identically)."""
    values = tuple(values)
    if not values or any("'" in value for value in values):
        raise ValueError(f"a CHECK vocabulary needs plain, non-empty values: {values!r}")
    quoted = ", ".join(f"'{value}'" for value in values)
    return f"{column} IN ({quoted})"


metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

workspaces = sa.Table(
    "workspaces",
    metadata,
    sa.Column("id", IdString, primary_key=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("reporting_currency", sa.String(3), nullable=False, server_default="USD"),
    sa.Column("timezone", sa.String(64), nullable=False, server_default="UTC"),
    sa.Column("created_at", UTCDateTime(), nullable=False),
)

api_keys = sa.Table(
    "api_keys",
    metadata,
    sa.Column("id", IdString, primary_key=True),
    sa.Column("workspace_id", IdString, sa.ForeignKey("workspaces.id"), nullable=False, index=True),
    sa.Column("scope", sa.String(16), nullable=False),
    # SHA-256 of the whole key, hex. The key itself is shown once and never stored.
    sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
    # The first characters of the key, so operators can tell keys apart in listings.
    sa.Column("key_prefix", sa.String(16), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("rotated_at", UTCDateTime(), nullable=True),
    sa.Column("revoked_at", UTCDateTime(), nullable=True),
    # When v1 last accepted the key, to the minute or so (`workspaces.note_key_used`); NULL: never.
    sa.Column("last_used_at", UTCDateTime(), nullable=True),
    sa.CheckConstraint(one_of("scope", SCOPES), name="scope"),
)

apps = sa.Table(
    "apps",
    metadata,
    sa.Column("id", IdString, primary_key=True),
    sa.Column("workspace_id", IdString, sa.ForeignKey("workspaces.id"), nullable=False, index=True),
    sa.Column("name", sa.String(200), nullable=False),
    # Publishable, not a secret (spec: "x-app-key ... not a secret"), so stored as is.
    sa.Column("publishable_key", sa.String(80), nullable=False, unique=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("revoked_at", UTCDateTime(), nullable=True),
)

audit_log = sa.Table(
    "audit_log",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("workspace_id", IdString, sa.ForeignKey("workspaces.id"), nullable=False),
    sa.Column("actor", sa.String(200), nullable=False),
    sa.Column("action", sa.String(64), nullable=False),
    sa.Column("subject_id", sa.String(64), nullable=True),
    sa.Column("detail", sa.JSON, nullable=False, default=dict),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Index("ix_audit_log_workspace_created", "workspace_id", "created_at"),
    sa.Index("ix_audit_log_subject", "subject_id"),
)
