"""Outbound webhooks, the pure part: envelopes frozen to bytes, signatures, the reference
verifier and the retry schedule. No I/O: receivers can copy `verify.py` (standard library only)."""
