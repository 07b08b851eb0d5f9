"""contracts/webhook: the payload schema file matches the model, is closed, and fits the samples."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from fleetd.model.events import idempotency_key
from fleetd.notify.contract import (
    SCHEMA_FILE,
    assert_schema_matches,
    export_schema,
    main,
    schema_drift,
)
from fleetd.notify.payload import IncidentEvent, encode_event

CONTRACTS = Path(__file__).resolve().parents[2] / "contracts" / "webhook"
SAMPLES = sorted((CONTRACTS / "samples").glob("*.json"))


def test_the_schema_file_matches_the_payload_model() -> None:
    """The committed schema is exactly what the model generates (regenerate, never edit)."""
    assert_schema_matches(CONTRACTS)
    assert main([str(CONTRACTS), "--check"]) == 0


def test_drift_is_reported_for_a_changed_or_missing_file(tmp_path: Path) -> None:
    """An edited or absent schema file is named; regenerating clears it."""
    assert schema_drift(tmp_path) == [f"{SCHEMA_FILE}: missing"]
    path = export_schema(tmp_path)
    assert schema_drift(tmp_path) == []
    path.write_text(path.read_text().replace('"additionalProperties": false', '"x": 1', 1))
    assert schema_drift(tmp_path) == [
        f"{SCHEMA_FILE}: differs from fleetd.notify.payload.IncidentEvent"
    ]
    with pytest.raises(AssertionError, match="drifted"):
        assert_schema_matches(tmp_path)
    assert main([str(tmp_path), "--check"]) == 1
    assert main([str(tmp_path)]) == 0
    assert schema_drift(tmp_path) == []


def _objects(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if node.get("type") == "object":
            yield node
        for value in node.values():
            yield from _objects(value)
    elif isinstance(node, list):
        for value in node:
            yield from _objects(value)


def test_every_object_in_the_schema_is_closed_and_fully_required() -> None:
    """additionalProperties is false and every property is required, at every level."""
    schema = json.loads((CONTRACTS / SCHEMA_FILE).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    objects = list(_objects(schema))
    assert len(objects) == 4
    for node in objects:
        assert node["additionalProperties"] is False, node.get("title")
        assert set(node["required"]) == set(node["properties"]), node.get("title")


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda path: path.stem)
def test_samples_fit_the_schema_and_the_model(sample: Path) -> None:
    """Each sample validates, decodes, and carries the idempotency key of its own facts."""
    schema = json.loads((CONTRACTS / SCHEMA_FILE).read_text())
    document = json.loads(sample.read_text())
    jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    ).validate(document)
    event = IncidentEvent.model_validate(document)
    assert event.event_id == idempotency_key(
        document["incident"]["id"], document["eventType"], document["eventRevision"]
    )
    assert json.loads(encode_event(event)) == document


def test_there_are_samples() -> None:
    """The samples directory is not silently empty."""
    assert {path.stem for path in SAMPLES} >= {"open", "resolved"}
