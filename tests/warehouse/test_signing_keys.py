"""The signing keys' state: one root, intermediates created on demand, rotation, the published set."""

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import sqlalchemy as sa

from tests.support import WEBHOOK_KEY
from transforms import trusted
from warehouse.db import Database, utcnow
from warehouse.signing import keys
from warehouse.signing.tables import signing_keys

KEY = WEBHOOK_KEY


def test_the_root_is_created_once_and_stored_sealed(db: Database) -> None:
    with db.write() as conn:
        root, created = keys.ensure_root(conn, instance_key=KEY)
        again, created_again = keys.ensure_root(conn, instance_key=KEY)
    assert created and not created_again
    assert again == root and len(root.public_key) == 32 and root.kid == trusted.kid(root.public_key)
    with db.read() as conn:
        stored = conn.execute(sa.select(signing_keys.c.private_key)).scalar_one()
    assert stored.startswith("v1.")  # sealed (transforms.sealing), not the raw key


def test_the_first_signer_creates_an_intermediate_certified_by_the_root(db: Database) -> None:
    with db.write() as conn:
        root, _ = keys.ensure_root(conn, instance_key=KEY)
        first = keys.signer(conn, instance_key=KEY)
        same = keys.signer(conn, instance_key=KEY)
    assert same.kid == first.kid and first.generation == 1
    public, expiry = trusted.open_chain(first.chain, root.public_key)
    assert public == trusted.raw_public(first.private_key)
    assert expiry == int(first.expires_at.timestamp())
    assert timedelta(days=89) < first.expires_at - utcnow() <= keys.INTERMEDIATE_LIFETIME


def test_no_root_no_intermediate(db: Database) -> None:
    with db.write() as conn:
        try:
            keys.signer(conn, instance_key=KEY)
        except keys.SigningKeysMissing:
            pass
        else:
            raise AssertionError("an intermediate without a root")


def test_an_expired_intermediate_is_replaced_and_leaves_the_published_set(db: Database) -> None:
    now = utcnow()
    with db.write() as conn:
        keys.ensure_root(conn, instance_key=KEY)
        old = keys.next_intermediate(conn, instance_key=KEY, after=0, now=now - timedelta(days=91))
        assert keys.current_intermediate(conn, instance_key=KEY, now=now) is None
        new = keys.signer(conn, instance_key=KEY, now=now)
        published = keys.published(conn, now=now)
    assert new.generation == old.generation + 1 and new.kid != old.kid
    assert [(k.role, k.kid) for k in published] == [("root", published[0].kid), ("intermediate", new.kid)]


def test_rotation_makes_a_new_current_key_and_keeps_the_old_one_published(db: Database) -> None:
    with db.write() as conn:
        keys.ensure_root(conn, instance_key=KEY)
        first = keys.signer(conn, instance_key=KEY)
        second = keys.rotate(conn, instance_key=KEY)
        current = keys.signer(conn, instance_key=KEY)
        published = [k.kid for k in keys.published(conn, now=utcnow())]
    assert current.kid == second.kid != first.kid and second.generation == 2
    assert published[1:] == [second.kid, first.kid]


def test_concurrent_first_signers_agree_on_one_intermediate(db: Database) -> None:
    """The conditional insert: every host that finds no key tries generation 1; one row wins."""
    with db.write() as conn:
        keys.ensure_root(conn, instance_key=KEY)

    def sign_first() -> str:
        with db.write() as conn:
            return keys.signer(conn, instance_key=KEY).kid

    with ThreadPoolExecutor(max_workers=6) as pool:
        kids = set(pool.map(lambda _: sign_first(), range(6)))
    with db.read() as conn:
        rows = conn.execute(sa.select(signing_keys.c.kid).where(signing_keys.c.role == "intermediate")).all()
    assert len(kids) == 1 and [r.kid for r in rows] == list(kids)
