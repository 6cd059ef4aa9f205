"""Vendor callbacks to canonical events: pure adapters, one registry keyed by vendor name."""
