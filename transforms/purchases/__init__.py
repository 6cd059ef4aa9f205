"""The stores' and payment providers' payloads as ledger facts and canonical events (pure)."""
