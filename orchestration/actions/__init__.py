"""Growth actions in Dagster: the executor (sensor and job)."""
