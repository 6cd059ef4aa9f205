"""Subscription metrics' inputs from the database: the ledger's grants and the apps' catalogs."""
