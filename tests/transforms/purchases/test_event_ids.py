"""The store mappings' event ids keep the shape the lake already holds: a webhook, a receipt and
a sync of one fact must keep landing it once, so an id may never change for the same raw id."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import pytest

from transforms.purchases import android_store as gp
from transforms.purchases import event_ids, generic, ios_store


@pytest.mark.parametrize(
    ("event_id", "prefix"), [(ios_store.event_id, "ios"), (gp.event_id, "gp"), (generic.event_id, "generic")]
)
def test_each_store_names_its_events_by_its_own_prefix_and_the_stores_id(
    event_id: Callable[[str, str], str], prefix: str
) -> None:
    assert event_id("GPA.3361-1234", "renewal") == f"{prefix}:GPA.3361-1234:renewal"
    long_id = "é" * 100  # too long for the lake's 80 characters: its UTF-8 digest stands in
    digest = hashlib.sha256(long_id.encode("utf-8")).hexdigest()[:40]
    assert event_id(long_id, "refund") == f"{prefix}:{digest}:refund"


def test_an_id_of_exactly_the_lakes_length_is_kept_as_it_is() -> None:
    raw = "7" * (event_ids.MAX_EVENT_ID - len("gp::refund"))
    assert event_ids.event_id("gp", raw, "refund") == f"gp:{raw}:refund"
    assert len(event_ids.event_id("gp", raw + "7", "refund")) < event_ids.MAX_EVENT_ID
