"""The fleet tools' error answers obey tool-result.v1 and say which rule failed.

``tests/conftest.py`` validates every answer the whole suite renders; this file provokes the
refusals a lead meets most and checks, beyond the envelope, that each names its field and rule.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from fleetd.api.tools import ToolFailure, ToolResult
from fleetd.testing import build_test_fleet, sample_document

CONTRACTS = Path(__file__).resolve().parents[2] / "contracts" / "api"


_PATTERN = "string_pattern_mismatch"


@pytest.mark.parametrize(
    ("tool", "args", "expected"),
    [
        ("fleet_spawn", {"profile": "no-such-profile"}, ("profile", "unknown_profile")),
        ("fleet_spawn", {"profile": "sonnet", "name": "Bad Name"}, ("name", _PATTERN)),
        ("fleet_send", {"target": "MEMBER", "prompt": "x" * 5000}, ("prompt", "string_too_long")),
        ("fleet_send", {"target": "MEMBER", "prompt": "   "}, ("prompt", "blank")),
        ("fleet_poll", {"ticket": "t1", "target": "lead"}, ("", "ticket_or_target")),
        ("fleet_stop", {}, ("", "session_or_pane")),
        ("fleet_stop", {"sessionId": "a", "paneId": "b"}, ("", "session_or_pane")),
    ],
)
async def test_refusals_name_the_field_and_rule(
    tmp_path: Path,
    envelope_validator: Draft202012Validator,
    tool: str,
    args: dict[str, Any],
    expected: tuple[str, str],
) -> None:
    """invalid_arguments carries the params schema and one error naming its field and rule."""
    document = sample_document(tmp_path)
    document["api"] = {**document["api"], "maxPromptChars": 4000}
    fleet = build_test_fleet(tmp_path, document=document)
    if args.get("target") == "MEMBER":
        args = {**args, "target": await fleet.spawn_ready()}
    answer = (await fleet.call(tool, **args)).to_json()
    assert list(envelope_validator.iter_errors(answer)) == [], answer
    error = answer["error"]
    assert error["code"] == "invalid_arguments"
    contract = json.loads((CONTRACTS / f"{tool}.params.schema.json").read_text())
    contract.pop("$schema")
    assert error["hint"]["schema"] == contract
    [field_error] = error["hint"]["errors"]
    assert (field_error["path"], field_error["type"]) == expected
    assert field_error["message"] != "invalid value"


def test_the_suite_guard_catches_an_answer_that_breaks_the_envelope(
    envelope_guard: Any,  # tests/conftest.py EnvelopeGuard
) -> None:
    """The autouse guard sees every rendered answer: an invalid_arguments without hint is caught."""
    ToolResult.failure(ToolFailure(code="invalid_arguments", message="m")).to_json()
    assert len(envelope_guard.violations) == 1
    envelope_guard.violations.clear()  # this breach was on purpose


def test_params_schemas_have_no_root_composition() -> None:
    """Cross-field rules live in descriptions: model APIs refuse root oneOf/anyOf/allOf/not/if."""
    for path in sorted(CONTRACTS.glob("*.params.schema.json")):
        schema = json.loads(path.read_text())
        assert not {"oneOf", "anyOf", "allOf", "not", "if"} & set(schema), path.name
        assert schema["type"] == "object", path.name


@pytest.mark.parametrize(
    ("tool", "args", "allowed"),
    [
        ("fleet_poll", {}, True),
        ("fleet_poll", {"ticket": "t1"}, True),
        ("fleet_poll", {"target": "lead"}, True),
        ("fleet_poll", {"ticket": "t1", "target": "lead"}, False),
        ("fleet_stop", {"sessionId": "s-1"}, True),
        ("fleet_stop", {"paneId": "w1:p1"}, True),
        ("fleet_stop", {}, False),
        ("fleet_stop", {"sessionId": "s-1", "paneId": "w1:p1"}, False),
    ],
)
def test_params_schemas_express_the_cross_field_rules(
    tool: str, args: dict[str, Any], allowed: bool
) -> None:
    """A request the service refuses for a cross-field rule is refused by its schema too."""
    schema = json.loads((CONTRACTS / f"{tool}.params.schema.json").read_text())
    assert Draft202012Validator(schema).is_valid(args) is allowed
