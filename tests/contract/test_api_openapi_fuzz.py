"""An OpenAPI-driven fuzz run: schemathesis drives the app from its own ``/openapi.json``.

The app is the one ``fleetd serve`` runs (``create_app`` over the composition root, on fakes via
:func:`~fleetd.testing.build_test_fleet`), reached in-process over ASGI; its lifespan starts the
service once for the run and stops it at the end. Every operation the document lists — probes,
metrics, each ``POST /v1/tools/<tool>`` and ``GET /v1/fleet`` — gets schema-valid and
schema-breaking requests with a lead's bearer token, and every answer must be no 5xx, a documented
status, content type and headers, and a body inside its documented schema.

``positive_data_acceptance`` is not asked for: a schema-valid call may still be refused by rules
the schema cannot hold (a profile must be configured; ``{"paneId": null}`` counts as a property
for the schema but as absent for the service, ``contracts/api/README.md``) — with a documented
4xx, which the checks below do hold it to.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import Case, GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core.result import Ok
from schemathesis.python.asgi import shutdown_lifespans

from fleetd.api.app import create_app
from fleetd.testing import LEAD_TOKEN, build_test_fleet

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
EXAMPLES_PER_OPERATION = 15
TOOL_PATHS = {
    "/v1/fleet",
    *(
        f"/v1/tools/{tool}"
        for tool in (
            "fleet_list",
            "fleet_poll",
            "fleet_reply",
            "fleet_send",
            "fleet_spawn",
            "fleet_status",
            "fleet_stop",
        )
    ),
}


@pytest.fixture
def schema(tmp_path: Path) -> Iterator[schemathesis.BaseSchema]:
    """The app's own document, loaded from ``/openapi.json``; the service stops after the run."""
    fleet = build_test_fleet(tmp_path)
    # Nothing moves the fake clock here: a wait (fleet_send's wait, the sinceVersion long-poll of
    # GET /v1/fleet) would never end. A fleetd asked to stop answers every waiter at once.
    fleet.service.stop_requested()
    app = create_app(fleet.service)
    try:
        yield schemathesis.openapi.from_asgi("/openapi.json", app)
    finally:
        shutdown_lifespans()
    assert not fleet.service.started


def test_fuzzing_the_documented_api_finds_no_5xx_and_no_undocumented_answer(
    schema: schemathesis.BaseSchema,
) -> None:
    """Every operation in /openapi.json, fuzzed as a lead: only documented answers, never a 5xx."""
    operations = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result.err()
        operations.append(result.ok())
    assert {op.path for op in operations} >= TOOL_PATHS
    cases = st.one_of(
        [
            op.as_strategy(generation_mode=mode)
            for op in operations
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
        ]
    )
    seen: set[tuple[str, str]] = set()

    @given(case=cases)
    @settings(
        max_examples=EXAMPLES_PER_OPERATION * len(operations),
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    def fuzz(case: Case[Any]) -> None:
        case.call_and_validate(headers={"Authorization": f"Bearer {LEAD_TOKEN}"}, checks=CHECKS)
        seen.add((case.method.upper(), case.path))

    fuzz()
    assert {path for _, path in seen} >= TOOL_PATHS, "the run reached every tool endpoint"
