"""Workspace dimension: the tenants, exported for analysts' joins."""
