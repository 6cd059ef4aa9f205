"""Ad accounts (sealed credentials) and the ad-entity registry."""
