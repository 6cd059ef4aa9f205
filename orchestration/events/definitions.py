"""The events domain: landed rows into the daily canonical_events dataset, dedup claim pruning.

`canonical_events_sensor` is not here: its interval is a deployment setting, so the composition
root builds it (`build_canonical_events_sensor`) with the resources.
"""

import dagster as dg

from orchestration.events.assets import canonical_events
from orchestration.events.jobs import canonical_events_job, prune_dedup_claims_job, prune_dedup_claims_schedule

defs = dg.Definitions(
    assets=[canonical_events],
    jobs=[canonical_events_job, prune_dedup_claims_job],
    schedules=[prune_dedup_claims_schedule],
)
