"""The operator dashboard's state: one-time login links and sign-in sessions (`sessions.py`)."""
