"""Ad accounts: the platform clients (Meta, Apple Search Ads, sandbox) and the registry sync."""
