"""Paywall experiments' state (issue 35): definitions, their weight history, sticky exposures."""
