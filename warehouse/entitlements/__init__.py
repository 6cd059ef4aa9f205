"""The entitlement ledger, the apps' store identities and the provider notifications received."""
