"""Dagster glue: definitions, assets, sensors, schedules, jobs, resources, checks."""
