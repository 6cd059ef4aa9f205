"""Integrations' state: the connected integrations (credentials sealed), their sync history,
and the sync target through which a connector writes into the existing paths."""
