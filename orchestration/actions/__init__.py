"""Growth actions in Dagster: the monitor of running actions (and the engine and executor steps)."""
