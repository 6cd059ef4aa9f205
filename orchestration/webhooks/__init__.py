"""Webhook delivery: a sensor that notices due deliveries and one job run that drains a batch."""
