"""Growth actions in Dagster: the executor (sensor and job) and the monitor of running actions."""
