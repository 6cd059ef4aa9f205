"""Ad spend: the raw daily deliveries of the ad-platform syncs (`spend_raw`), which the reports read."""
