"""Outbound webhooks, the persisted part: endpoints, signing secrets, the outbox of frozen
events, deliveries (the queue) and the attempt history."""
