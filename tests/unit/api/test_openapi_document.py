"""/openapi.json documents every fleet tool: its schemas are the contract files, byte for byte."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from openapi_spec_validator import OpenAPIV31SpecValidator

from fleetd.api.app import create_app
from fleetd.api.openapi import ERROR_STATUSES, FAILURE_PREFIX
from fleetd.api.schemas import JSON_SCHEMA_DIALECT
from fleetd.testing import build_test_fleet

CONTRACTS = Path(__file__).resolve().parents[3] / "contracts" / "api"
COMPONENTS = "#/components/schemas/"


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


def _rebuilt(document: dict[str, Any], name: str) -> dict[str, Any]:
    """Component ``name`` with the components beside it folded back into ``$defs``."""
    schemas = document["components"]["schemas"]
    prefix = name + "."

    def back(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                key: "#/$defs/" + item.removeprefix(COMPONENTS + prefix)
                if key == "$ref"
                else back(item)
                for key, item in value.items()
            }
        if isinstance(value, list):
            return [back(item) for item in value]
        return value

    rebuilt = back(schemas[name])
    defs = {k.removeprefix(prefix): back(v) for k, v in schemas.items() if k.startswith(prefix)}
    if defs:
        rebuilt["$defs"] = defs
    return {"$schema": JSON_SCHEMA_DIALECT, **rebuilt}


def _contract(name: str) -> Any:
    return json.loads((CONTRACTS / name).read_text(encoding="utf-8"))


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
        assert operation["security"] == [{"bearer": []}], tool
        body = operation["requestBody"]["content"]["application/json"]["schema"]
        assert body == {"$ref": f"{COMPONENTS}{tool}.params"}, tool
        statuses = {int(code) for code in operation["responses"]} - {200}
        assert statuses == set(ERROR_STATUSES), tool
        for status in statuses:
            content = operation["responses"][str(status)]["content"]["application/json"]
            assert content["schema"] == {"$ref": COMPONENTS + FAILURE_PREFIX}, (tool, status)
        ok = operation["responses"]["200"]["content"]["application/json"]["schema"]
        assert ok["properties"]["result"] == {"$ref": f"{COMPONENTS}{tool}.result"}, tool
    fleet = document["paths"]["/v1/fleet"]["get"]
    assert fleet["security"] == [{"bearer": []}]
    assert "requestBody" not in fleet
    ok = fleet["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok["properties"]["result"] == {"$ref": f"{COMPONENTS}fleet_list.result"}


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
@pytest.mark.parametrize("kind", ["params", "result"])
def test_each_tool_schema_in_the_document_is_its_contract_file(
    document: dict[str, Any], tool: str, kind: str
) -> None:
    """The request and result schemas are contracts/api/<tool>.<kind>.schema.json, unchanged."""
    assert _rebuilt(document, f"{tool}.{kind}") == _contract(f"{tool}.{kind}.schema.json")


def test_the_failure_envelope_is_the_failure_branch_of_tool_result_v1(
    document: dict[str, Any],
) -> None:
    """Every error status answers the failure branch of tool-result.v1.schema.json."""
    envelope = _contract("tool-result.v1.schema.json")
    failure = _rebuilt(document, FAILURE_PREFIX)
    assert failure.pop("$defs") == envelope["$defs"]
    assert failure == {"$schema": JSON_SCHEMA_DIALECT, **envelope["oneOf"][1]}


def test_the_served_document_is_valid_openapi_3_1(document: dict[str, Any]) -> None:
    """/openapi.json passes openapi-spec-validator as OpenAPI 3.1, with no error at all."""
    errors = [error.message for error in OpenAPIV31SpecValidator(document).iter_errors()]
    assert errors == []
