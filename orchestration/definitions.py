"""The one composition root: per-domain definitions merged, resources bound once.

`workspace.yaml` loads this module; `dagster definitions validate` checks it in the tests.
"""

from __future__ import annotations

import dagster as dg

from orchestration.reports.definitions import defs as report_defs
from orchestration.resources import DatabaseResource, LakeResource
from orchestration.workspaces.assets import defs as workspace_defs


def build_definitions(database_url: str | None = None, data_dir: str | None = None) -> dg.Definitions:
    """Tests pass explicit locations; processes leave them None to follow FLOKIT_* at run time."""
    return dg.Definitions.merge(
        workspace_defs,
        report_defs,
        dg.Definitions(
            resources={
                "database": DatabaseResource(url=database_url),
                "lake": LakeResource(data_dir=data_dir),
            }
        ),
    )


defs = build_definitions()
