"""The answer envelope of every fleet tool, as pydantic models: one tool's whole answer.

Every call answers ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": {code, message,
hint?}}`` (``contracts/api/tool-result.v1.schema.json``). This module holds the failure branch as
models (:class:`ToolFailureAnswer`, its :class:`ToolErrorBody` and the hint of each correctable
code) — in the package, not read from ``contracts/`` (an installed fleetd has no ``contracts/``
directory); a test holds them to the file — and builds, per tool, the success envelope whose
``result`` is that tool's result model (:func:`success_model`). FastAPI documents the pieces in
``/openapi.json`` (:mod:`fleetd.api.http_tools`); MCP declares the whole as each tool's
``outputSchema`` (:func:`output_schema`, :mod:`fleetd.api.mcp_server`), which the structured
content of every answer, success or failure, satisfies. The models document; the answers are
built by :class:`~fleetd.api.tools.ToolResult`, whose bytes the contract tests pin.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, GetJsonSchemaHandler, create_model
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue, WithJsonSchema
from pydantic_core import CoreSchema

from fleetd.api.tools import ToolSpec

__all__ = [
    "ENVELOPE_HEADER",
    "ToolErrorBody",
    "ToolFailureAnswer",
    "envelope_schema",
    "output_schema",
    "success_model",
]

#: Codes whose failure never carries a hint (only an outside change can fix them).
_HINTLESS = ["unauthenticated", "forbidden", "rate_limited", "internal_error"]


def _untitled(schema: dict[str, Any]) -> None:
    """Drop pydantic's generated titles (the class and field names restated)."""
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)


class _Closed(BaseModel):
    """A closed wire object of the envelope: camelCase names, unknown fields refused."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        validate_by_name=True,
        json_schema_extra=_untitled,
    )


class UnknownToolHint(_Closed):
    """``unknown_tool``: the tools the caller may call."""

    tools: list[str] = Field(description="the tools the caller's role may call")


class FieldError(_Closed):
    """One refused field; never the rejected value."""

    path: str = Field(description="dotted field path; empty for the whole object")
    type: str
    message: str


class InvalidArgumentsHint(_Closed):
    """``invalid_arguments``: the params schema and each refused field."""

    schema_: Annotated[
        dict[str, Any],
        WithJsonSchema({"type": "object", "description": "the tool's params JSON Schema"}),
    ] = Field(alias="schema")
    errors: list[FieldError]


class BodyTooLargeHint(_Closed):
    """``body_too_large``: the limit."""

    max_bytes: int = Field(ge=1)


class InvalidBodyHint(_Closed):
    """``invalid_body``: what the body should have been."""

    expected: str


class ProfileBenchedHint(_Closed):
    """``profile_benched``: the bench, and the profiles that can take the work now."""

    profile: str
    model: str
    provider: str | None
    reason: Literal["model_unavailable"]
    benched_until: datetime
    retry_after_seconds: int = Field(ge=1)
    profiles: list[str] = Field(
        description="profiles that can take the work now: not benched, a slot free"
    )


#: The hint each correctable code must carry.
_HINTS: dict[str, type[BaseModel]] = {
    "unknown_tool": UnknownToolHint,
    "invalid_arguments": InvalidArgumentsHint,
    "body_too_large": BodyTooLargeHint,
    "invalid_body": InvalidBodyHint,
    "profile_benched": ProfileBenchedHint,
}


class ToolErrorBody(_Closed):
    """A model-visible failure: a code, a message and, only when correctable, a hint."""

    code: str = Field(pattern="^[a-z][a-z_]*$")
    message: str = Field(min_length=1)
    hint: Annotated[Any, WithJsonSchema({})] = None

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """The fields, and which codes must (or must not) carry which hint."""
        reference = handler(core_schema)
        schema = handler.resolve_ref_schema(reference)
        schema["properties"]["hint"].pop("default", None)
        rules: list[dict[str, Any]] = [
            {
                "if": {"properties": {"code": {"enum": _HINTLESS}}},
                "then": {"not": {"required": ["hint"]}},
            }
        ]
        for code, hint in _HINTS.items():
            rules.append(
                {
                    "if": {"properties": {"code": {"const": code}}},
                    "then": {
                        "required": ["hint"],
                        "properties": {"hint": handler(hint.__pydantic_core_schema__)},
                    },
                }
            )
        schema["allOf"] = rules
        return reference


class ToolFailureAnswer(_Closed):
    """The failure branch of every answer (every error status of the HTTP routes)."""

    ok: Literal[False]
    error: ToolErrorBody


def success_model(spec: ToolSpec[Any]) -> type[BaseModel]:
    """The success branch of tool ``spec``'s answer: ``{"ok": true, "result": <result model>}``
    (any object for a tool without a result model)."""
    result: Any = spec.result if spec.result is not None else dict[str, Any]
    name = "".join(part.title() for part in spec.name.split("_")) + "Answer"
    model: type[BaseModel] = create_model(
        name,
        __config__=ConfigDict(extra="forbid", frozen=True, json_schema_extra=_untitled),
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
