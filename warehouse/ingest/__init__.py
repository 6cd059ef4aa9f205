"""Measurement ingest state: vendor credentials, event mappings and IP allowlists."""
