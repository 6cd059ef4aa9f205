"""Growth actions in Dagster: the engine after each reports publish, the executor, the monitor."""
