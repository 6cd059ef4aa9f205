"""The analyst catalog view over the `canonical_events` lake dataset."""

from __future__ import annotations

from transforms.events import CANONICAL_EVENT_SCHEMA
from warehouse.catalog import CatalogView

CANONICAL_EVENTS_DATASET = "canonical_events"

CANONICAL_EVENTS_VIEW = CatalogView(
    name="canonical_events",
    dataset=CANONICAL_EVENTS_DATASET,
    description="Every accepted event (attribution callbacks and other sources), one row per event, "
    "deduplicated; partitioned by UTC day of occurred_at.",
    schema=CANONICAL_EVENT_SCHEMA,
    column_comments={
        "event_id": "Stable id: the vendor's own id hashed with vendor and app, else derived from "
        "vendor, app, identity, type, time and vendor token. Unique per workspace.",
        "workspace_id": "Tenant (ws_...).",
        "event_type": "Canonical type: install, reattribution, paywall_impression, paywall_offer_tap, "
        "trial_start, trial_converted, subscription_start, renewal, cancellation, refund, purchase.",
        "occurred_at": "When it happened (UTC), from the vendor's created_at.",
        "platform": "ios or android; NULL when the vendor's os_name was neither.",
        "country": "ISO 3166-1 alpha-2, uppercase.",
        "user_id": "FloKit-side user id (partner parameter), for identity joins.",
        "adid": "Attribution vendor device id.",
        "idfa": "Apple advertising id.",
        "gps_adid": "Google advertising id.",
        "properties": "JSON text: revenue, currency, event_token, activity_kind. Use json_extract.",
        "source": "Where it came from, e.g. attribution_provider_a.",
        "received_at": "When FloKit accepted it (UTC).",
    },
)
