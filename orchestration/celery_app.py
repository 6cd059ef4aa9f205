"""The Celery app that FloKit's run workers start with (`flokit serve worker`):

    celery -A orchestration.celery_app worker -Q flokit -n NAME@%h -c N -P prefork

It is the instance's own launcher app (`DagsterInstance.get().run_launcher.celery`, built from the
generated dagster.yaml): the broker, the result backend and every Celery setting come from the
one file the daemon reads too, so a worker and the daemon cannot disagree. The tasks are
dagster-celery's (`execute_job`, `resume_job`: each runs one Dagster run in the pool process, the
run's steps in that process, `in_process_executor`, since a prefork child may not start
processes of its own: docs/deploy.md).

Before a run's task starts, the worker records its hostname on the run (`WORKER_TAG`), which the
daemon's health check pings (orchestration/launcher.py). A tag rather than the result's STARTED
meta: a duplicate delivery can overwrite the meta, never the tag.
"""

from __future__ import annotations

import json
from typing import Any

import dagster as dg
from celery import Celery, signals
from dagster_celery.config import TASK_EXECUTE_JOB_NAME, TASK_RESUME_JOB_NAME
from dagster_celery.tasks import create_execute_job_task, create_resume_job_task

from orchestration.launcher import WORKER_TAG, FloKitCeleryRunLauncher


def _app() -> Celery:
    with dg.DagsterInstance.get() as instance:
        launcher = instance.run_launcher
        if not isinstance(launcher, FloKitCeleryRunLauncher):
            raise RuntimeError(
                f"the Dagster instance at DAGSTER_HOME uses {type(launcher).__name__}, not FloKitCeleryRunLauncher: "
                "set FLOKIT_RUN_LAUNCHER=celery (and start workers with `flokit serve worker`)"
            )
        return launcher.celery


app = _app()
execute_job = create_execute_job_task(app)
resume_job = create_resume_job_task(app)


@signals.task_prerun.connect
def record_worker(task: Any = None, kwargs: dict[str, Any] | None = None, **_: Any) -> None:
    """Tag the run with this worker's hostname before its task runs it."""
    if task is None or task.name not in (TASK_EXECUTE_JOB_NAME, TASK_RESUME_JOB_NAME):
        return
    packed = next(iter((kwargs or {}).values()), None)  # ExecuteRunArgs/ResumeRunArgs, packed as a dict
    run_id = getattr(dg.deserialize_value(json.dumps(packed)), "run_id", None)
    if not isinstance(run_id, str):
        return
    with dg.DagsterInstance.get() as instance:
        instance.add_run_tags(run_id, {WORKER_TAG: task.request.hostname})
