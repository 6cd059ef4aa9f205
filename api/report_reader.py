"""The worker's one reader of the published report store, shared by every surface that reads it.

Created on first use (after gunicorn forked), one per process, kept on the Flask app: v1's reports
and the dashboard's report pages read through it (`warehouse.reports.answers`).

With the lake in an object store, the process also starts a follower thread that keeps this
host's copy of the published store in step with the store's pointer (`warehouse.reports.published`);
until the host holds a copy while the store is unreachable, `/readyz` says so.
"""

from __future__ import annotations

import logging
import threading

from flask import current_app

from api.context import state
from warehouse.reports import serving
from warehouse.reports.published import Follower, ReportCopy

READER = "flokit.reports"
FOLLOWER = "flokit.reports.follower"
log = logging.getLogger("flokit.api.reports")
_STARTING = threading.Lock()


def report_reader() -> serving.ReportReader:
    """The worker's reader, created on first use (after gunicorn forked), one per process."""
    reader = current_app.extensions.get(READER)
    if reader is None:
        _follower()
        reader = current_app.extensions.setdefault(READER, serving.ReportReader(state().settings.paths.reports))
    return reader


def reports_not_ready() -> str | None:
    """Why this process cannot serve the reports (None: it can, or nothing is published yet)."""
    follower = _follower()
    return follower.not_ready() if follower is not None else None


def _follower() -> Follower | None:
    paths = state().settings.paths
    store = paths.object_store()
    if store is None:
        return None
    with _STARTING:
        follower = current_app.extensions.get(FOLLOWER)
        if follower is None:
            follower = current_app.extensions[FOLLOWER] = Follower(ReportCopy(paths, store), log.warning)
    return follower
