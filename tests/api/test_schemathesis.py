"""Schemathesis against the live v1 server: no 5xx, no answer that the document does not describe.

The server is a real threaded HTTP server on 127.0.0.1 serving only the v1 surface (so its
/openapi.json is the v1 document), with a bootstrapped read-write key, a queue of actions in every
status (tests/support/actions.py), so that generated ids sometimes hit real actions, and published
reports (a generated history refreshed through the real assets), so that report answers with rows,
organic ones included, are checked against their declared schemas (`response_schema_conformance`).
Examples per operation are capped to keep the run short.
"""

import dataclasses
import shutil
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import dagster as dg
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from api.app import create_app
from tests.support import live_server
from tests.support.actions import seed_queue
from tests.support.money import reports_database
from tests.support.reports import START, refresh, seed_lake
from warehouse.db import Database, utcnow
from warehouse.settings import Settings
from warehouse.tables import workspaces
from warehouse.workspaces import create_key

# Enough to exercise every operation with valid and invalid inputs; small enough to stay fast.
MAX_EXAMPLES = 30
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
HISTORY_DAYS = 45
# The query parameters that pick a date range of each report, steered to the published cohorts.
REPORT_RANGES = {
    "/v1/reports/payback": ("start_date", "end_date"),
    "/v1/reports/cohorts": ("cohort_start", "cohort_end"),
}


@pytest.fixture(scope="module")
def published_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real refresh per module (seconds): the reports of a generated history, for WORKSPACE."""
    data_dir = tmp_path_factory.mktemp("published")
    seed_lake(data_dir, WORKSPACE, users=600, days=HISTORY_DAYS)
    with dg.DagsterInstance.ephemeral() as instance:
        result = refresh(data_dir, reports_database(data_dir, WORKSPACE), instance)
        assert result is not None and result.success
    return data_dir


WORKSPACE = "ws_schemathesis"


@dataclasses.dataclass(frozen=True)
class Server:
    base: str
    auth: dict[str, str]
    workspace_id: str
    action_ids: list[str]


@pytest.fixture
def v1_server(settings: Settings, db: Database, published_dir: Path) -> Iterator[Server]:
    with db.write() as conn:
        conn.execute(
            workspaces.insert().values(
                id=WORKSPACE, name="Schemathesis", reporting_currency="USD", timezone="UTC", created_at=utcnow()
            )
        )
        key = create_key(conn, workspace_id=WORKSPACE, scope="read_write").api_key
        demo = seed_queue(conn, workspace_id=WORKSPACE)
    shutil.copytree(published_dir, settings.data_dir, dirs_exist_ok=True)
    app = create_app(dataclasses.replace(settings, surfaces=("v1",)))
    with live_server(app) as base:
        yield Server(
            base=base,
            auth={"Authorization": f"Bearer {key}"},
            workspace_id=WORKSPACE,
            action_ids=[a.id for a in demo],
        )


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_live_v1_server_conforms_to_its_document(v1_server: Server, mode: GenerationMode) -> None:
    """Every operation of the served document, with valid (positive) or invalid (negative) inputs.

    Hypothesis is driven directly rather than through schemathesis' pytest plugin, whose lazy
    loader reads a pytest-internal attribute that pytest 9.2 no longer has. Valid cases are
    steered, some of the time, to real action ids and the key's own workspace, so that approvals,
    rejections, rollbacks and creations also succeed and conflict, not only answer 404, and report
    ranges to the published cohorts, so that reports answer rows and not only `[]`.
    """
    server = v1_server
    schema = schemathesis.openapi.from_url(f"{server.base}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {op.label for op in operations} >= {"GET /v1/actions", "POST /v1/actions/{action_id}/approve"}
    for operation in operations:
        declared = schema.raw_schema["paths"][operation.path][operation.method.lower()]
        if mode == GenerationMode.NEGATIVE and not (declared.get("parameters") or declared.get("requestBody")):
            continue  # nothing a client sends can be invalid

        @settings(
            max_examples=MAX_EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy(generation_mode=mode), pick=st.integers(0, len(server.action_ids)))
        def conforms(case: schemathesis.Case, pick: int) -> None:
            if mode == GenerationMode.POSITIVE and pick < len(server.action_ids):
                if "action_id" in (case.path_parameters or {}):
                    case.path_parameters["action_id"] = server.action_ids[pick]
                if isinstance(case.body, dict) and "workspace_id" in case.body:
                    case.body["workspace_id"] = server.workspace_id
                if case.operation.path in REPORT_RANGES and isinstance(case.query, dict):
                    # Cohorts that were published, so that answers carry rows (some organic).
                    first, last = REPORT_RANGES[case.operation.path]
                    case.query[first] = START.isoformat()
                    case.query[last] = (START + timedelta(days=HISTORY_DAYS - 1 - pick)).isoformat()
            case.call_and_validate(base_url=server.base, headers=server.auth, checks=CHECKS)

        conforms()
