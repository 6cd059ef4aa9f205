"""Analyst catalog: warehouse.duckdb, one view per lake dataset, rebuilt after its inputs change."""
