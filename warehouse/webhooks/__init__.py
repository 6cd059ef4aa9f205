"""Outbound webhooks: the outbox written in the caller's transaction (replaced at merge by the webhooks issue)."""
