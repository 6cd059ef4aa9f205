"""Ad accounts: the platforms FloKit can change budgets and statuses on, their config files, the
currencies' minor units, the mapping of platform objects to the reports' labels, and the sandbox
platform's objects (docs/actions-engine.md, "Tables": `ad_accounts`, `ad_entities`)."""
