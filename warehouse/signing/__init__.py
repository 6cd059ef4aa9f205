"""The keys that sign entitlement answers (issue 36 part 1): one root, short-lived intermediates."""
