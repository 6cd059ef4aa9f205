"""Paywall configurations published per app and paywall, in versions."""
