"""Outbound calls: every HTTP, S3 and SDK client FloKit uses to call a third party.

`api` and `orchestration` may not import each other, and both call the same vendors (Google Play
verifies a receipt in `api` and is synced in `orchestration`), so the clients live in a room of
their own beside them. A client may import only `transforms` among our rooms (the pure mapping of
what it reads); it never touches the database or Dagster. Module names carry the vendor's spec
name and their docstring's first line names the vendor (docs/architecture-notes.md,
"`clients/` is a sixth room").
"""
