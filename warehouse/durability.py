"""Is an acknowledged write safe from a database crash? The server's settings decide.

FloKit acknowledges an ingest callback, a paywall event or an approval once its transaction
commits. Whether "committed" survives a crash of the database server is PostgreSQL's
`synchronous_commit` (off: the last moments of acknowledged commits can vanish in a crash, and
did in our fault tests; docs/benchmarks.md), `fsync` and `full_page_writes` (off: an OS
crash or power loss can lose or corrupt committed data). Production requires all three `on`
(README "Production"); `flokit up` and `flokit db upgrade` name any that is not.

SQLite runs in WAL mode with `synchronous=NORMAL` (warehouse/db.py): durable across a crash of
any FloKit process; an OS crash or power loss may roll back the last transactions. It is the
embedded default, not the production database, so it gets no warning.
"""

from __future__ import annotations

from warehouse.db import Database

# Setting -> the values under which a committed transaction survives a crash.
_SAFE = {
    "synchronous_commit": {"on", "remote_apply", "remote_write", "local"},
    "fsync": {"on"},
    "full_page_writes": {"on"},
}
_CONSEQUENCE = {
    "synchronous_commit": "acknowledged events can be lost when the server crashes",
    "fsync": "committed data can be lost or corrupted by an OS crash or power loss",
    "full_page_writes": "an OS crash or power loss can corrupt data pages",
}


def durability_warnings(db: Database) -> list[str]:
    """One sentence per PostgreSQL setting that lets a committed transaction be lost."""
    if db.is_sqlite:
        return []
    with db.read() as conn:
        found = {name: str(conn.exec_driver_sql(f"SHOW {name}").scalar_one()) for name in _SAFE}
    return [
        f"PostgreSQL {name} = {value}: {_CONSEQUENCE[name]}; production requires {name} = on"
        for name, value in found.items()
        if value not in _SAFE[name]
    ]
