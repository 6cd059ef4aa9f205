"""The growth-actions domain: the engine after each reports publish (executor and monitor beside it)."""
