"""Pure mappers from what a store or provider states (once verified) to `StoreFact`s and
canonical events: one module per source, no I/O."""
