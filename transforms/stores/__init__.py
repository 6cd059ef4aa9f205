"""Each store's verified payloads mapped to `StoreFact`s and canonical events: pure, no I/O."""
