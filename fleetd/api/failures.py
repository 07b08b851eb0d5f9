"""The failure branch of every fleet tool's answer, as pydantic models, and the one list of
codes that never carry a hint.

A call that fails answers ``{"ok": false, "error": {code, message, hint?}}``
(``contracts/api/tool-result.v1.schema.json``): :class:`ToolFailureAnswer`, its
:class:`ToolErrorBody`, and the hint each correctable code must carry. The models are in the
package, not read from ``contracts/`` (an installed fleetd has no ``contracts/`` directory); a
test holds them to the file. :class:`~fleetd.api.tools.ToolFailure` is written as a
:class:`ToolErrorBody` (:func:`error_body`), and :mod:`fleetd.api.envelope` puts this branch
beside each tool's success branch.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, GetJsonSchemaHandler
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue, WithJsonSchema
from pydantic_core import CoreSchema

__all__ = [
    "HINTLESS_CODES",
    "INTERNAL_ERROR_CODE",
    "ToolErrorBody",
    "ToolFailureAnswer",
    "error_body",
    "failure_responses",
    "untitled",
]

INTERNAL_ERROR_CODE = "internal_error"

#: Codes whose failure never carries a hint (only an outside change can fix them).
HINTLESS_CODES = ("unauthenticated", "forbidden", "rate_limited", INTERNAL_ERROR_CODE)


def untitled(schema: dict[str, Any]) -> None:
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
        json_schema_extra=untitled,
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
    """``invalid_arguments``: the params schema and each refused field (the first 20; the count
    of the others in ``errorsOmitted``)."""

    schema_: Annotated[
        dict[str, Any],
        WithJsonSchema({"type": "object", "description": "the tool's params JSON Schema"}),
    ] = Field(alias="schema")
    errors: list[FieldError] = Field(max_length=20)
    errors_omitted: int = Field(
        default=0, ge=0, description="refused fields past the first 20, not listed"
    )


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
                "if": {"properties": {"code": {"enum": list(HINTLESS_CODES)}}},
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


def error_body(code: str, message: str, hint: Any = None) -> dict[str, Any]:
    """The ``error`` object of a failure, written as its :class:`ToolErrorBody` (no hint key
    without a hint; the hint as it was given)."""
    fields: dict[str, Any] = {"code": code, "message": message}
    if hint is not None:
        fields["hint"] = hint
    body: dict[str, Any] = ToolErrorBody.model_construct(**fields).model_dump(
        by_alias=True, exclude_unset=True
    )
    return body


def failure_responses(described: Mapping[int, str]) -> dict[int | str, dict[str, Any]]:
    """FastAPI's ``responses`` for the error statuses ``described`` (status: description): each
    answers the failure envelope, and a 401 also names its challenge."""
    answers: dict[int | str, dict[str, Any]] = {
        status: {"description": description, "model": ToolFailureAnswer}
        for status, description in described.items()
    }
    if 401 in answers:
        answers[401]["headers"] = {
            "WWW-Authenticate": {"description": "Bearer", "schema": {"type": "string"}}
        }
    return answers
