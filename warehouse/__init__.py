"""All persisted state: the operational database, the Parquet lake, the DuckDB catalog, settings."""
