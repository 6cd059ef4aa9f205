"""Integrations: the pure side (integration types and their configs, sync error vocabulary, and
each provider's mapping from its records to canonical events and spend rows)."""
