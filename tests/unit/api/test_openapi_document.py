"""/openapi.json documents every fleet tool: its schemas are the contract files, byte for byte."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from jsonschema import Draft202012Validator
from openapi_spec_validator import OpenAPIV31SpecValidator

from fleetd.api.app import create_app
from fleetd.api.envelope import ToolFailureAnswer
from fleetd.api.tool_routes import ERROR_STATUSES
from fleetd.testing import build_test_fleet

CONTRACTS = Path(__file__).resolve().parents[3] / "contracts" / "api"
COMPONENTS = "#/components/schemas/"
FAILURE = {"$ref": COMPONENTS + "ToolFailureAnswer"}


@pytest.fixture
async def document(tmp_path: Path) -> dict[str, Any]:
    """The document the app serves at /openapi.json."""
    app = create_app(build_test_fleet(tmp_path).service)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://fleetd") as client:
        answer = await client.get("/openapi.json")
    assert answer.status_code == 200
    body: dict[str, Any] = answer.json()
    return body


def _tools() -> list[str]:
    return sorted(p.name.removesuffix(".params.schema.json") for p in CONTRACTS.glob("*.params.*"))


def _inlined(value: Any, lookup: dict[str, Any], prefix: str) -> Any:
    """``value`` with every ``$ref`` under ``prefix`` replaced by what it names, recursively."""
    if isinstance(value, dict):
        ref = value.get("$ref")
        if isinstance(ref, str) and ref.startswith(prefix):
            rest = {k: v for k, v in value.items() if k != "$ref"}
            named = _inlined(lookup[ref.removeprefix(prefix)], lookup, prefix)
            return {**named, **_inlined(rest, lookup, prefix)}
        return {key: _inlined(item, lookup, prefix) for key, item in value.items()}
    if isinstance(value, list):
        return [_inlined(item, lookup, prefix) for item in value]
    return value


def _from_document(document: dict[str, Any], schema: dict[str, Any]) -> Any:
    """A schema of the document with its component references inlined."""
    return _inlined(schema, document["components"]["schemas"], COMPONENTS)


def _without_null_defaults(value: Any) -> Any:
    """``value`` without ``"default": null`` annotations: FastAPI encodes its document without
    nulls, and a default only annotates (it validates nothing)."""
    if isinstance(value, dict):
        return {
            key: _without_null_defaults(item)
            for key, item in value.items()
            if not (key == "default" and item is None)
        }
    if isinstance(value, list):
        return [_without_null_defaults(item) for item in value]
    return value


def _from_contract(name: str) -> Any:
    """A contract file's schema with its ``$defs`` references inlined, as the document has it."""
    schema = _contract(name)
    defs = schema.pop("$defs", {})
    schema.pop("$schema")
    return _without_null_defaults(_inlined(schema, defs, "#/$defs/"))


def _contract(name: str) -> Any:
    return json.loads((CONTRACTS / name).read_text(encoding="utf-8"))


def test_the_document_is_fastapis_own(tmp_path: Path) -> None:
    """No hand-assembled document: /openapi.json is FastAPI's generator, unpatched."""
    app = create_app(build_test_fleet(tmp_path).service)
    assert type(app).openapi is FastAPI.openapi
    assert "openapi" not in vars(app)


def test_every_tool_has_an_operation_with_bearer_auth_and_every_error_status(
    document: dict[str, Any],
) -> None:
    """Each tool is POST /v1/tools/<tool> behind the bearer scheme, answering every error status."""
    assert document["openapi"].startswith("3.1")
    assert document["components"]["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": document["components"]["securitySchemes"]["bearer"]["description"],
    }
    for tool in _tools():
        operation = document["paths"][f"/v1/tools/{tool}"]["post"]
        assert operation["operationId"] == tool
        assert operation["security"] == [{"bearer": []}], tool
        assert operation["requestBody"]["required"] is True, tool
        statuses = {int(code) for code in operation["responses"]} - {200}
        assert statuses == set(ERROR_STATUSES), tool
        for status in statuses:
            content = operation["responses"][str(status)]["content"]["application/json"]
            assert content["schema"] == FAILURE, (tool, status)
    fleet = document["paths"]["/v1/fleet"]["get"]
    assert fleet["security"] == [{"bearer": []}]
    assert "requestBody" not in fleet
    assert {p["name"] for p in fleet["parameters"]} == {
        "sinceVersion",
        "wait",
        "scope",
        "If-None-Match",
    }
    [scope] = [p for p in fleet["parameters"] if p["name"] == "scope"]
    assert scope["schema"]["enum"] == ["instance", "all"]
    assert set(fleet["responses"]) == {
        "200",
        "304",
        "401",
        "403",
        "409",
        "422",
        "429",
        "500",
        "503",
    }
    assert "ETag" in fleet["responses"]["200"]["headers"]
    assert "/v1/tools/{name}" not in document["paths"]


def test_probes_stay_open_and_name_their_media_types(document: dict[str, Any]) -> None:
    """Probes need no token; /readyz and /healthz say health+json, /metrics the exposition."""
    for path in ("/livez", "/readyz", "/healthz", "/metrics"):
        assert "security" not in document["paths"][path]["get"], path
    readyz = document["paths"]["/readyz"]["get"]["responses"]
    assert set(readyz["200"]["content"]) == {"application/health+json"}
    assert "503" in readyz
    assert set(document["paths"]["/metrics"]["get"]["responses"]["200"]["content"]) == {
        "text/plain; version=1.0.0; charset=utf-8"
    }


@pytest.mark.parametrize("tool", _tools())
def test_each_tool_params_schema_in_the_document_is_its_contract_file(
    document: dict[str, Any], tool: str
) -> None:
    """The request body of POST /v1/tools/<tool> is contracts/api/<tool>.params.schema.json."""
    operation = document["paths"][f"/v1/tools/{tool}"]["post"]
    body = operation["requestBody"]["content"]["application/json"]["schema"]
    assert _from_document(document, body) == _from_contract(f"{tool}.params.schema.json")


@pytest.mark.parametrize("tool", _tools())
def test_each_tool_result_schema_in_the_document_is_its_contract_file(
    document: dict[str, Any], tool: str
) -> None:
    """The 200 answer of POST /v1/tools/<tool> is ``{"ok": true, "result": <the contract file>}``
    (and GET /v1/fleet's that of fleet_list, or with scope=all its own contract file)."""
    answers = [(f"/v1/tools/{tool}", "post", f"{tool}.result.schema.json")]
    if tool == "fleet_list":
        answers.append(("/v1/fleet", "get", f"{tool}.result.schema.json"))
        answers.append(("/v1/fleet", "get", "fleet_list.scope-all.result.schema.json"))
    for path, method, contract in answers:
        ok = document["paths"][path][method]["responses"]["200"]["content"]["application/json"]
        schema = _from_document(document, ok["schema"])
        branches = schema["anyOf"] if path == "/v1/fleet" else [schema]
        expected = _from_contract(contract)
        [answer] = [b for b in branches if b["properties"]["result"] == expected]
        assert answer["required"] == ["ok", "result"]
        assert answer["additionalProperties"] is False
        assert answer["properties"]["ok"]["const"] is True


FAILURES: list[Any] = [
    {"ok": False, "error": {"code": "conflict", "message": "m"}},
    {"ok": False, "error": {"code": "unknown_tool", "message": "m", "hint": {"tools": ["a"]}}},
    {"ok": False, "error": {"code": "body_too_large", "message": "m", "hint": {"maxBytes": 9}}},
    {"ok": False, "error": {"code": "invalid_body", "message": "m", "hint": {"expected": "x"}}},
    {
        "ok": False,
        "error": {
            "code": "invalid_arguments",
            "message": "m",
            "hint": {"schema": {}, "errors": [{"path": "", "type": "t", "message": "m"}]},
        },
    },
    {
        "ok": False,
        "error": {
            "code": "profile_benched",
            "message": "m",
            "hint": {
                "profile": "p",
                "model": "m",
                "provider": None,
                "reason": "model_unavailable",
                "benchedUntil": "2026-01-01T00:00:00Z",
                "retryAfterSeconds": 3,
                "profiles": [],
            },
        },
    },
    {"ok": False, "error": {"code": "unknown_target", "message": "m", "hint": [1]}},
    {"ok": True},
    {"ok": False},
    {"ok": False, "error": {"code": "forbidden", "message": "m", "hint": {"ask": "x"}}},
    {"ok": False, "error": {"code": "unknown_tool", "message": "m"}},
    {"ok": False, "error": {"code": "unknown_tool", "message": "m", "hint": {"tools": 1}}},
    {"ok": False, "error": {"code": "invalid_arguments", "message": "m", "hint": {}}},
    {"ok": False, "error": {"code": "body_too_large", "message": "m", "hint": {"maxBytes": 0}}},
    {"ok": False, "error": {"code": "invalid_body", "message": "m", "hint": {}}},
    {"ok": False, "error": {"code": "profile_benched", "message": "m", "hint": {"profile": "p"}}},
    {"ok": False, "error": {"code": "Bad Code", "message": "m"}},
    {"ok": False, "error": {"code": "conflict", "message": ""}},
    {"ok": False, "error": {"code": "conflict", "message": "m", "extra": 1}},
]


def test_the_failure_model_accepts_what_tool_result_v1_accepts(document: dict[str, Any]) -> None:
    """Every error status answers ToolFailureAnswer, which accepts and refuses the same answers
    as the failure branch of contracts/api/tool-result.v1.schema.json."""
    contract = _contract("tool-result.v1.schema.json")
    branch = Draft202012Validator({**contract["oneOf"][1], "$defs": contract["$defs"]})
    generated = Draft202012Validator(_from_document(document, FAILURE))
    model = Draft202012Validator(ToolFailureAnswer.model_json_schema())
    verdicts = [(branch.is_valid(d), generated.is_valid(d), model.is_valid(d)) for d in FAILURES]
    assert verdicts == [(ok, ok, ok) for ok in [True] * 7 + [False] * 12]


def test_the_served_document_is_valid_openapi_3_1(document: dict[str, Any]) -> None:
    """/openapi.json passes openapi-spec-validator as OpenAPI 3.1, with no error at all."""
    errors = [error.message for error in OpenAPIV31SpecValidator(document).iter_errors()]
    assert errors == []


PROBE_BODIES = Path(__file__).resolve().parents[2] / "fixtures" / "answers" / "probes.json"


def _probe_schema(document: dict[str, Any], path: str, status: int) -> Any:
    """The body schema /openapi.json gives ``GET path`` for ``status``, references inlined."""
    answer = document["paths"][path]["get"]["responses"][str(status)]
    return _from_document(document, answer["content"]["application/health+json"]["schema"])


def test_healthz_names_its_components(document: dict[str, Any]) -> None:
    """/healthz's 200 body is described: a pass-or-warn status and a closed components object
    naming controlLink (its status first, then the link), inbox, config, loops and fleetHealth."""
    body = _probe_schema(document, "/healthz", 200)
    assert body["properties"]["status"]["enum"] == ["pass", "warn"]
    components = body["properties"]["components"]
    names = ["controlLink", "inbox", "config", "loops", "fleetHealth"]
    assert (list(components["properties"]), components["required"]) == (names, names)
    assert components["additionalProperties"] is False
    link = components["properties"]["controlLink"]
    assert list(link["properties"])[:3] == ["status", "state", "classifiedBy"]
    assert list(
        components["properties"]["fleetHealth"]["properties"]["coverage"]["properties"]
    ) == [
        "detection",
        "peerRouting",
        "humanEscalation",
        "status",
        "reason",
    ]


def test_the_pinned_probe_bodies_match_their_described_schemas(document: dict[str, Any]) -> None:
    """Every /healthz and /readyz body pinned in tests/fixtures/answers/probes.json is valid
    against the schema /openapi.json gives its path and status (200 and 503 for /readyz)."""
    pinned = json.loads(PROBE_BODIES.read_text(encoding="utf-8"))
    for label, answer in pinned.items():
        path = "/healthz" if "/healthz" in label else "/readyz"
        schema = _probe_schema(document, path, answer["status"])
        errors = [
            e.message for e in Draft202012Validator(schema).iter_errors(json.loads(answer["body"]))
        ]
        assert errors == [], label
