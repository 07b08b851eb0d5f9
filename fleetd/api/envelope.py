"""The answer envelope of every fleet tool, as pydantic models: one tool's whole answer.

Every call answers ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": {code, message,
hint?}}`` (``contracts/api/tool-result.v1.schema.json``). The failure branch is
:mod:`fleetd.api.failures`' (:class:`ToolFailureAnswer`, re-exported here); this module builds,
per tool, the success envelope whose ``result`` is that tool's result model
(:func:`success_model`). FastAPI documents the pieces in
``/openapi.json`` (:mod:`fleetd.api.http_tools`); MCP declares the whole as each tool's
``outputSchema`` (:func:`output_schema`, :mod:`fleetd.api.mcp_server`), which the structured
content of every answer, success or failure, satisfies. The answers are written by
:class:`~fleetd.api.tools.ToolResult` (a failure as its :class:`ToolErrorBody`), whose bytes
the contract tests pin.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, create_model

from fleetd.api.failures import ToolErrorBody, ToolFailureAnswer, untitled
from fleetd.api.tools import ToolSpec

__all__ = [
    "ENVELOPE_HEADER",
    "ToolErrorBody",
    "ToolFailureAnswer",
    "envelope_schema",
    "output_schema",
    "success_model",
]


def success_model(spec: ToolSpec[Any]) -> type[BaseModel]:
    """The success branch of tool ``spec``'s answer: ``{"ok": true, "result": <result model>}``
    (any object for a tool without a result model)."""
    result: Any = spec.result if spec.result is not None else dict[str, Any]
    name = "".join(part.title() for part in spec.name.split("_")) + "Answer"
    model: type[BaseModel] = create_model(
        name,
        __config__=ConfigDict(extra="forbid", frozen=True, json_schema_extra=untitled),
        __doc__=f"The success branch of {spec.name}'s answer.",
        ok=(Literal[True], ...),
        result=(result, ...),
    )
    return model


#: What ``contracts/api/tool-result.v1.schema.json`` says of itself.
ENVELOPE_HEADER: dict[str, str] = {
    "$id": "tool-result.v1.schema.json",
    "title": "fleetd tool result, version 1",
    "description": "What every fleet tool call answers, over HTTP (the response body) and over "
    "MCP (the text and structuredContent of the tool result; isError is true exactly when ok is "
    "false). A failure carries a hint only when the caller can correct it.",
}


def envelope_schema(result: dict[str, Any] | None = None) -> dict[str, Any]:
    """One answer as a JSON Schema (an object at the root, as MCP asks): ``{"ok": true,
    "result": <result>}`` (any object without ``result``) or :class:`ToolFailureAnswer`; the
    result's ``$defs`` sit beside the failure's."""
    failure = ToolFailureAnswer.model_json_schema()
    defs: dict[str, Any] = failure.pop("$defs", {})
    body: dict[str, Any] = {"type": "object"} if result is None else dict(result)
    result_defs: dict[str, Any] = body.pop("$defs", {})
    clash = set(defs) & set(result_defs)
    if clash:
        raise ValueError(f"result $defs {sorted(clash)} clash with the envelope's")
    success = {
        "type": "object",
        "required": ["ok", "result"],
        "additionalProperties": False,
        "properties": {"ok": {"const": True}, "result": body},
    }
    return {"type": "object", "oneOf": [success, failure], "$defs": {**defs, **result_defs}}


def output_schema(spec: ToolSpec[Any]) -> dict[str, Any]:
    """The whole answer of tool ``spec`` (MCP's ``outputSchema``): :func:`envelope_schema` with the
    tool's result schema (any object for a tool without a result model)."""
    try:
        return envelope_schema(None if spec.result is None else spec.result.model_json_schema())
    except ValueError as clash:
        raise ValueError(f"tool {spec.name}: {clash}") from None
