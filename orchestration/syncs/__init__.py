"""Integration syncs: queued `integration_syncs` rows become Dagster runs that pull from a
provider and write through the existing paths (landing for events, the spend writer for spend)."""
