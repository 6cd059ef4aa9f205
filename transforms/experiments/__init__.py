"""Paywall experiments (issue 35): the definition, who enters, which variant a user gets, and the
statistics of the results. Pure code: the gateway, the API and the results asset call it."""
