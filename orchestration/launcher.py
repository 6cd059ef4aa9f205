"""`FloKitCeleryRunLauncher`: dagster-celery's run launcher, with a health check that sees a dead host.

With FLOKIT_RUN_LAUNCHER=celery each Dagster run is one Celery task on a worker host
(`flokit serve worker`, orchestration/celery_app.py). dagster-celery 0.29.27's
`CeleryRunLauncher.check_run_worker_health` reads only the task's state in the result backend
(docs/deploy.md, /work/shared/design/scale-out.md §0.2, §3):

- a worker host killed whole (`kill -9` of its process group, a lost machine) leaves the state at
  STARTED, so the run was reported RUNNING until the result expired: a run left STARTED for good;
- a PENDING state (the result expired, Redis restarted) read as UNKNOWN, and Dagster's run
  monitoring fails a healthy run on UNKNOWN;
- its `resume_run` sends the resume task a keyword the task does not take (TypeError in the
  daemon; dagster-io/dagster#33493, unmerged), so this launcher does not offer resumes: a run
  whose worker died is failed, and the instance's `run_retries` runs it again on another worker.

Here, the worker records its Celery hostname on the run when it starts the task (the
`flokit/celery_worker` tag, orchestration/celery_app.py; STARTED's own meta is the fallback), and
each health check asks that worker over the broker's control channel whether it runs the task
(`query_task`: a ping that also catches a worker restarted under the same name, which answers but
lost the run). `misses` checks in a row without that answer (5 s apart in the generated instance)
and the run is FAILED. A worker that holds the task is alive, whatever the result backend shows.
"""

from __future__ import annotations

from typing import Any

import dagster as dg
from dagster._core.launcher import (  # noqa: TID251  (no public export)
    CheckRunHealthResult,
    LaunchRunContext,
    WorkerStatus,
)
from dagster_celery.launcher import CeleryRunLauncher
from dagster_celery.tags import DAGSTER_CELERY_TASK_ID_TAG

# The Celery hostname (`name@host`) of the worker that started the run's task.
WORKER_TAG = "flokit/celery_worker"
# Dagster's run tag for how a retry re-executes (dagster/_core/storage/tags.py).
RETRY_STRATEGY_TAG = "dagster/retry_strategy"
DEFAULT_MISSES = 3
DEFAULT_PING_TIMEOUT_S = 2.0


class FloKitCeleryRunLauncher(CeleryRunLauncher):
    """Runs as Celery tasks; a run whose worker stops answering pings is reported dead."""

    def __init__(
        self,
        default_queue: str,
        worker_ping_misses: int = DEFAULT_MISSES,
        worker_ping_timeout_seconds: float = DEFAULT_PING_TIMEOUT_S,
        **kwargs: Any,
    ) -> None:
        super().__init__(default_queue=default_queue, **kwargs)
        self.worker_ping_misses = worker_ping_misses
        self.worker_ping_timeout_seconds = worker_ping_timeout_seconds
        # Consecutive unanswered checks per run, in the daemon's process (its monitoring thread
        # keeps one launcher for its life); a restarted daemon starts counting again.
        self._misses: dict[str, int] = {}

    @classmethod
    def config_type(cls) -> dict[str, Any]:
        return {
            **super().config_type(),  # type: ignore[dict-item]
            "worker_ping_misses": dg.Field(
                int, is_required=False, default_value=DEFAULT_MISSES, description="Unanswered checks before FAILED."
            ),
            "worker_ping_timeout_seconds": dg.Field(
                float, is_required=False, default_value=DEFAULT_PING_TIMEOUT_S, description="Wait for a pong."
            ),
        }

    def launch_run(self, context: LaunchRunContext) -> None:
        """Upstream's launch, after tagging the run's retry to re-run every step (unless the run says
        otherwise): Dagster's default, FROM_FAILURE, would load the outputs of the steps that had
        succeeded from the IO manager of the dead worker's DAGSTER_HOME, on another host."""
        run = context.dagster_run
        if RETRY_STRATEGY_TAG not in run.tags:
            self._instance.add_run_tags(run.run_id, {RETRY_STRATEGY_TAG: "ALL_STEPS"})
        super().launch_run(context)

    @property
    def supports_resume_run(self) -> bool:
        # Upstream's resume sends `execute_job_args_packed` to a task that takes
        # `resume_job_args_packed`; a retry (run_retries) re-runs the run instead.
        return False

    def check_run_worker_health(self, run: dg.DagsterRun) -> CheckRunHealthResult:
        task_id = run.tags.get(DAGSTER_CELERY_TASK_ID_TAG)
        try:
            result = self.celery.AsyncResult(task_id) if task_id else None
            state = result.state if result is not None else "PENDING"
            if state == "SUCCESS":
                self._misses.pop(run.run_id, None)
                return CheckRunHealthResult(WorkerStatus.SUCCESS)
            if state == "FAILURE":
                self._misses.pop(run.run_id, None)
                return CheckRunHealthResult(
                    WorkerStatus.FAILED, f"Celery task failed: {result.result if result else ''}"
                )
            hostname = run.tags.get(WORKER_TAG) or _started_on(result)
            if hostname is None:
                return self._missed(run, f"Celery task {state} and no worker recorded on the run")
            answered = self._ask(hostname, task_id or "")
            if answered is None:
                return self._missed(run, f"worker {hostname} did not answer")
            if not answered:  # restarted under the same name (a supervisor's restart): the run died with it
                return self._missed(run, f"worker {hostname} answers but does not run task {task_id}")
            self._misses.pop(run.run_id, None)
            return CheckRunHealthResult(WorkerStatus.RUNNING, run_worker_id=hostname)
        except Exception as exc:  # the broker or the result backend is unreachable: cannot tell
            return CheckRunHealthResult(WorkerStatus.RUNNING, f"could not check the worker: {exc}", transient=True)

    def _ask(self, hostname: str, task_id: str) -> bool | None:
        """Whether the worker holds the task (active or reserved); None when it does not answer.
        `query_task` is answered by the worker's main process, whatever its pool children do."""
        inspect = self.celery.control.inspect(destination=[hostname], timeout=self.worker_ping_timeout_seconds)
        replies = inspect.query_task(task_id)
        if not replies or hostname not in replies:
            return None
        return task_id in (replies[hostname] or {})

    def _missed(self, run: dg.DagsterRun, why: str) -> CheckRunHealthResult:
        count = self._misses.get(run.run_id, 0) + 1
        if count < self.worker_ping_misses:
            self._misses[run.run_id] = count
            return CheckRunHealthResult(WorkerStatus.RUNNING, f"{why} ({count} of {self.worker_ping_misses})")
        self._misses.pop(run.run_id, None)
        return CheckRunHealthResult(WorkerStatus.FAILED, f"{why}, {count} checks in a row: the worker is gone")


def _started_on(result: Any) -> str | None:
    """The hostname in a STARTED state's meta (`{'pid': ..., 'hostname': ...}`, celery/app/trace.py)."""
    if result is None or result.state != "STARTED" or not isinstance(result.info, dict):
        return None
    hostname = result.info.get("hostname")
    return hostname if isinstance(hostname, str) else None
