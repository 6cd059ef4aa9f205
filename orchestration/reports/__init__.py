"""Payback and cohort reports: assets, checks, the six-hourly schedule."""
