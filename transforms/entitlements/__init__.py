"""Entitlements as a ledger: what stores and providers state about purchases (pure logic)."""
