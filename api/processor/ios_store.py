"""Placeholder until this provider's notifications are processed (issue 17)."""

from __future__ import annotations

from api.processor.framework import Handler, Unverified


class _NotYet:
    def verify(self, incoming, ctx):  # type: ignore[no-untyped-def]
        raise Unverified("Notifications of this provider are not processed yet")

    decode = verify

    def effects(self, verified, ctx):  # type: ignore[no-untyped-def]
        raise Unverified("Notifications of this provider are not processed yet")


def handler_for(path: str) -> Handler:
    return _NotYet()
