"""The worker's one reader of the published report store, shared by every surface that reads it.

Created on first use (after gunicorn forked), one per process, kept on the Flask app: v1's reports
and the dashboard's report pages read through it (`warehouse.reports.answers`).
"""

from __future__ import annotations

from flask import current_app

from api.context import state
from warehouse.reports import serving

READER = "flokit.reports"


def report_reader() -> serving.ReportReader:
    """The worker's reader, created on first use (after gunicorn forked), one per process."""
    reader = current_app.extensions.get(READER)
    if reader is None:
        reader = current_app.extensions.setdefault(READER, serving.ReportReader(state().settings.paths.reports))
    return reader
