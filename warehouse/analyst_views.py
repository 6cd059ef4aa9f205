"""Every view of the analyst catalog, in the order it is built: the one list the `analyst_catalog`
asset and `flokit catalog pull` read (each domain declares its own views)."""

from __future__ import annotations

from warehouse.catalog import CatalogView
from warehouse.events.views import CANONICAL_EVENTS_VIEW
from warehouse.reports.catalog_views import REPORT_VIEWS

ANALYST_VIEWS: tuple[CatalogView, ...] = (CANONICAL_EVENTS_VIEW, *REPORT_VIEWS)
