"""The answer envelope of every fleet tool as JSON Schema: one tool's whole answer, either branch.

Every call answers ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": {code, message,
hint?}}`` (``contracts/api/tool-result.v1.schema.json``). This module holds the failure branch and
its ``$defs`` — written here, not read from ``contracts/`` (an installed fleetd has no
``contracts/`` directory); a test pins them to the file — and builds, per tool, the envelope
whose success branch carries that tool's result schema (:func:`output_schema`). ``/openapi.json``
uses the pieces (:mod:`fleetd.api.openapi`); MCP declares the whole as each tool's
``outputSchema`` (:mod:`fleetd.api.mcp_server`), which the structured content of every answer,
success or failure, satisfies.
"""

from __future__ import annotations

from typing import Any

from fleetd.api.tools import ToolSpec

__all__ = ["FAILURE_DEFS", "FAILURE_ENVELOPE", "closed_object", "output_schema"]


_HINTLESS = ["unauthenticated", "forbidden", "rate_limited", "internal_error"]


def _hint_when(code: str, hint: str) -> dict[str, Any]:
    return {
        "if": {"properties": {"code": {"const": code}}},
        "then": {"required": ["hint"], "properties": {"hint": {"$ref": f"#/$defs/{hint}"}}},
    }


def closed_object(required: list[str], properties: dict[str, Any]) -> dict[str, Any]:
    """An object schema with exactly ``properties``, the ``required`` ones required."""
    return {
        "type": "object",
        "required": required,
        "additionalProperties": False,
        "properties": properties,
    }


#: ``tool-result.v1.schema.json``'s failure branch and its ``$defs`` (pinned to the file by a test).
FAILURE_ENVELOPE: dict[str, Any] = closed_object(
    ["ok", "error"], {"ok": {"const": False}, "error": {"$ref": "#/$defs/error"}}
)
FAILURE_DEFS: dict[str, dict[str, Any]] = {
    "error": {
        **closed_object(
            ["code", "message"],
            {
                "code": {"type": "string", "pattern": "^[a-z][a-z_]*$"},
                "message": {"type": "string", "minLength": 1},
                "hint": {},
            },
        ),
        "allOf": [
            {
                "if": {"properties": {"code": {"enum": _HINTLESS}}},
                "then": {"not": {"required": ["hint"]}},
            },
            _hint_when("unknown_tool", "unknownToolHint"),
            _hint_when("invalid_arguments", "invalidArgumentsHint"),
            _hint_when("body_too_large", "bodyTooLargeHint"),
            _hint_when("invalid_body", "invalidBodyHint"),
            _hint_when("profile_benched", "profileBenchedHint"),
        ],
    },
    "unknownToolHint": closed_object(
        ["tools"],
        {
            "tools": {
                "type": "array",
                "items": {"type": "string"},
                "description": "the tools the caller's role may call",
            }
        },
    ),
    "invalidArgumentsHint": closed_object(
        ["schema", "errors"],
        {
            "schema": {"type": "object", "description": "the tool's params JSON Schema"},
            "errors": {
                "type": "array",
                "items": closed_object(
                    ["path", "type", "message"],
                    {
                        "path": {
                            "type": "string",
                            "description": "dotted field path; empty for the whole object",
                        },
                        "type": {"type": "string"},
                        "message": {"type": "string"},
                    },
                ),
            },
        },
    ),
    "bodyTooLargeHint": closed_object(
        ["maxBytes"], {"maxBytes": {"type": "integer", "minimum": 1}}
    ),
    "invalidBodyHint": closed_object(["expected"], {"expected": {"type": "string"}}),
    "profileBenchedHint": closed_object(
        [
            "profile",
            "model",
            "provider",
            "reason",
            "benchedUntil",
            "retryAfterSeconds",
            "profiles",
        ],
        {
            "profile": {"type": "string"},
            "model": {"type": "string"},
            "provider": {"type": ["string", "null"]},
            "reason": {"const": "model_unavailable"},
            "benchedUntil": {"type": "string", "format": "date-time"},
            "retryAfterSeconds": {"type": "integer", "minimum": 1},
            "profiles": {
                "type": "array",
                "items": {"type": "string"},
                "description": "profiles that can take the work now: not benched, a slot free",
            },
        },
    ),
}


def output_schema(spec: ToolSpec[Any]) -> dict[str, Any]:
    """The whole answer of tool ``spec`` as one JSON Schema (an object at the root, as MCP asks):
    the success branch with the tool's result schema (any object for a tool without a result
    model), or the failure branch; the result's ``$defs`` sit beside the failure's."""
    result: dict[str, Any] = {"type": "object"}
    defs: dict[str, Any] = dict(FAILURE_DEFS)
    if spec.result is not None:
        schema = spec.result.model_json_schema()
        result = {key: value for key, value in schema.items() if key != "$defs"}
        clash = set(defs) & set(schema.get("$defs", {}))
        if clash:
            raise ValueError(
                f"tool {spec.name}: result $defs {sorted(clash)} clash with the envelope"
            )
        defs.update(schema.get("$defs", {}))
    success = closed_object(["ok", "result"], {"ok": {"const": True}, "result": result})
    return {"type": "object", "oneOf": [success, FAILURE_ENVELOPE], "$defs": defs}
