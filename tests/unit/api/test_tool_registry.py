"""The tool registry: four gates, failures as model-visible values, hints only where correctable."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, field_validator

from fleetd.api.tools import (
    Caller,
    Role,
    ToolFailure,
    ToolParams,
    ToolRegistry,
    ToolResult,
    ToolSpec,
    failure_from_error,
)
from fleetd.errors import AuthError, PermissionDeniedError, UnknownTargetError, UnknownToolError
from tests.unit.api.api_doubles import (
    LEAD,
    MEMBER,
    OPERATOR,
    SECRET_IN_HANDLER,
    Calls,
    NoParams,
    build_registry,
)


async def test_success_runs_the_handler_with_validated_params(
    registry: ToolRegistry, calls: Calls
) -> None:
    """A valid call runs the handler once with the caller and typed params and wraps its result."""
    outcome = await registry.call(LEAD, "echo", {"text": "hi", "times": 2})
    assert outcome.to_json() == {"ok": True, "result": {"echo": "hi hi", "by": "alpha"}}
    [(name, caller, params)] = calls.seen
    assert (name, caller) == ("echo", LEAD)
    assert params == registry.get("echo").params(text="hi", times=2)


def _nested(depth: int) -> list[Any]:
    """A list nested ``depth`` deep (deeper than Python's own stack reaches)."""
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


# (caller, tool, args) -> expected code; the handler must never run.
REFUSED: list[tuple[str, Caller, str, dict[str, Any], str]] = [
    ("unknown tool", LEAD, "fleet_nope", {}, "unknown_tool"),
    ("wrong type", LEAD, "echo", {"text": 5}, "invalid_arguments"),
    ("string for int", LEAD, "echo", {"text": "a", "times": "2"}, "invalid_arguments"),
    ("bool for int", LEAD, "echo", {"text": "a", "times": True}, "invalid_arguments"),
    ("out of range", LEAD, "echo", {"text": "a", "times": 9}, "invalid_arguments"),
    ("bad literal", LEAD, "echo", {"text": "a", "mode": "quiet"}, "invalid_arguments"),
    ("missing field", LEAD, "echo", {}, "invalid_arguments"),
    ("extra field", LEAD, "echo", {"text": "a", "colour": "red"}, "invalid_arguments"),
    ("not JSON", LEAD, "echo", {"text": object()}, "invalid_arguments"),
    ("nested past the stack", LEAD, "echo", {"text": _nested(10_000)}, "invalid_arguments"),
    ("member calls lead tool", MEMBER, "echo", {"text": "a"}, "forbidden"),
    ("lead calls member tool", LEAD, "fleet_reply", {"content": "a"}, "forbidden"),
    ("operator calls lead tool", OPERATOR, "echo", {"text": "a"}, "forbidden"),
    ("member, bad args, lead tool", MEMBER, "echo", {"bogus": 1}, "forbidden"),
]


@pytest.mark.parametrize("case", REFUSED, ids=[case[0] for case in REFUSED])
async def test_refused_calls_never_reach_the_handler(
    registry: ToolRegistry, calls: Calls, case: tuple[str, Caller, str, dict[str, Any], str]
) -> None:
    """Unknown tools, wrong roles and bad arguments are refused as values; no handler runs."""
    _, caller, tool, args, code = case
    outcome = await registry.call(caller, tool, args)
    assert not outcome.ok
    assert outcome.error is not None
    assert outcome.error.code == code
    assert calls.seen == []


async def test_an_unknown_tools_long_name_is_said_back_cut_short(registry: ToolRegistry) -> None:
    """A tool name as long as a URL allows is named in the refusal by its first characters and
    its length, not said back whole."""
    outcome = await registry.call(LEAD, "fleet_" + "x" * 5000, {})
    assert outcome.error is not None
    assert outcome.error.code == "unknown_tool"
    assert len(outcome.error.message) < 200
    assert "(5006 characters)" in outcome.error.message


async def test_unknown_tool_hint_lists_the_tools_of_the_callers_role(
    registry: ToolRegistry,
) -> None:
    """An unknown tool's hint names exactly the tools the caller's role may call."""
    lead = await registry.call(LEAD, "fleet_sned", {})
    member = await registry.call(MEMBER, "fleet_sned", {})
    assert lead.error is not None
    assert member.error is not None
    assert lead.error.hint == {"tools": ["bad_shape", "boom", "echo", "find", "fleet_list"]}
    assert member.error.hint == {"tools": ["fleet_reply"]}
    assert lead.error.http_status == 404


async def test_bad_arguments_hint_carries_schema_and_field_paths(registry: ToolRegistry) -> None:
    """A bad-arguments hint gives the params schema and one path per error, no input values."""
    outcome = await registry.call(LEAD, "echo", {"times": "zzz-value", "colour": "red"})
    assert outcome.error is not None
    hint = outcome.error.hint
    assert hint["schema"] == registry.get("echo").params_schema()
    assert hint["schema"]["additionalProperties"] is False
    assert {(e["path"], e["type"]) for e in hint["errors"]} == {
        ("text", "missing"),
        ("times", "int_type"),
        ("colour", "extra_forbidden"),
    }
    assert "zzz-value" not in json.dumps(outcome.to_json())
    assert outcome.error.http_status == 422


@settings(max_examples=50, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.text(min_size=8, alphabet="abcdefghijklmnopqrstuvwxyz0123456789-"))
@example(value="required")
@example(value="zzz-secret-value")
async def test_rejected_values_are_never_echoed(value: str) -> None:
    """Whatever value fails validation, the failure value never contains it.

    The failure carries the params schema and fixed messages; a value that is a word of those
    (``required``, ``properties``) appears there for any input, so it is compared against the same
    failure for a value that cannot be quoted by accident.
    """
    registry = build_registry(Calls())
    for shape in ({"text": "a", "times": "{}"}, {"text": "a", "mode": "{}"}, {"text": ["{}"]}):
        sentinel = await registry.call(LEAD, "echo", _fill(shape, "#"))
        assume(value not in json.dumps(sentinel.to_json()))
        outcome = await registry.call(LEAD, "echo", _fill(shape, value))
        assert outcome.error is not None
        assert value not in json.dumps(outcome.to_json())


def _fill(shape: dict[str, Any], value: str) -> dict[str, Any]:
    """The arguments ``shape`` with every ``"{}"`` placeholder replaced by ``value``."""
    filled: dict[str, Any] = {}
    for key, slot in shape.items():
        filled[key] = [value] if slot == ["{}"] else value if slot == "{}" else slot
    return filled


async def test_custom_validator_messages_are_replaced() -> None:
    """A custom validator's message, which may quote the input, is replaced by a fixed text."""

    class Strict(ToolParams):
        name: str

        @field_validator("name")
        @classmethod
        def _no_spaces(cls, value: str) -> str:
            if " " in value:
                raise ValueError(f"bad name {value}")
            return value

    async def handler(caller: Caller, params: Strict) -> dict[str, Any]:
        return {}

    registry = ToolRegistry()
    registry.register(
        ToolSpec(
            name="named", description="d", params=Strict, roles=frozenset(Role), handler=handler
        )
    )
    outcome = await registry.call(LEAD, "named", {"name": "has secret-space"})
    assert outcome.error is not None
    assert outcome.error.hint["errors"] == [
        {"path": "name", "type": "value_error", "message": "invalid value"}
    ]
    assert "secret-space" not in json.dumps(outcome.to_json())


# target -> (code, status, hint)
HANDLER_FAILURES: dict[str, tuple[str, int, Any]] = {
    "ghost": ("unknown_target", 404, {"targets": ["s-1", "s-2"]}),
    "busy": ("conflict", 409, {"retry": "after its turn ends"}),
    "full": ("capacity_exceeded", 409, None),
    "sneaky": ("forbidden", 403, None),
}


@pytest.mark.parametrize("target", sorted(HANDLER_FAILURES))
async def test_handler_tool_errors_become_failure_values(
    registry: ToolRegistry, target: str
) -> None:
    """A handler's ToolError keeps its code and status; only correctable ones keep a hint."""
    outcome = await registry.call(LEAD, "find", {"target": target})
    assert outcome.error is not None
    error = outcome.error
    assert (error.code, error.http_status, error.hint) == HANDLER_FAILURES[target]


async def test_unexpected_exceptions_become_internal_error_without_text(
    registry: ToolRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    """A handler bug is an internal_error with no exception text, logged locally on fleetd.api."""
    with caplog.at_level(logging.ERROR, logger="fleetd.api"):
        outcome = await registry.call(LEAD, "boom", {})
    assert outcome.error is not None
    assert outcome.error.code == "internal_error"
    assert outcome.error.hint is None
    assert outcome.error.http_status == 500
    assert SECRET_IN_HANDLER not in json.dumps(outcome.to_json())
    assert any(r.name == "fleetd.api" and r.exc_info for r in caplog.records)


async def test_a_result_outside_its_model_is_logged_never_turned_into_a_failure(
    registry: ToolRegistry, caplog: pytest.LogCaptureFixture, result_breaches: Any
) -> None:
    """A declared result model checks the handler's output. The handler's work is done (it may
    have accepted a send), so a wrong shape is logged as a contract breach naming the field, and
    the caller still gets what was built rather than a failure it might answer by repeating."""
    result_breaches.expect()
    good = await registry.call(OPERATOR, "fleet_list", {})
    with caplog.at_level(logging.ERROR, logger="fleetd.api"):
        bad = await registry.call(LEAD, "bad_shape", {})
    assert good.to_json() == {"ok": True, "result": {"sessions": ["s-1", "s-2"]}}
    assert bad.error is None
    [line] = [r.getMessage() for r in caplog.records if "result contract" in r.getMessage()]
    assert line.startswith("tool bad_shape answered outside its result contract at sessions")


class _AliasedResult(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=False)

    session_id: str = Field(alias="sessionId")
    ratio: float
    branch: str | None = None


async def test_result_model_checks_but_never_reshapes_the_output() -> None:
    """The caller gets the handler's output as built: no renamed keys, no added defaults."""
    built = {"sessionId": "s-1", "ratio": 2}

    async def handler(caller: Caller, params: NoParams) -> dict[str, Any]:
        return dict(built)

    registry = ToolRegistry()
    registry.register(
        ToolSpec(
            name="row",
            description="One row.",
            params=NoParams,
            roles=frozenset({Role.LEAD}),
            handler=handler,
            result=_AliasedResult,
        )
    )
    outcome = await registry.call(LEAD, "row", {})
    assert outcome.to_json() == {"ok": True, "result": built}
    assert json.dumps(outcome.to_json()["result"]) == json.dumps(built)


async def test_contact_hooks_run_on_every_call_even_refused_ones(registry: ToolRegistry) -> None:
    """Every call, successful or refused, reports the caller to each contact hook first."""
    seen: list[Caller] = []

    async def hook(caller: Caller) -> None:
        seen.append(caller)

    registry.on_contact.append(hook)
    await registry.call(MEMBER, "fleet_reply", {"content": "done"})
    await registry.call(MEMBER, "echo", {"text": "x"})
    await registry.call(MEMBER, "fleet_nope", {})
    assert seen == [MEMBER, MEMBER, MEMBER]


async def test_a_failing_contact_hook_does_not_fail_the_call(
    registry: ToolRegistry, calls: Calls, caplog: pytest.LogCaptureFixture
) -> None:
    """A contact hook that raises is logged and the call still runs."""

    async def broken(caller: Caller) -> None:
        raise RuntimeError("hook down")

    registry.on_contact.append(broken)
    with caplog.at_level(logging.ERROR, logger="fleetd.api"):
        outcome = await registry.call(MEMBER, "fleet_reply", {"content": "done"})
    assert outcome.ok
    assert calls.names() == ["fleet_reply"]
    assert any("contact hook" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("error", "hint"),
    [
        (AuthError("x", hint={"token": "mint one"}), None),
        (PermissionDeniedError("x", hint={"ask": "lead"}), None),
        (UnknownTargetError("x", hint={"targets": []}), {"targets": []}),
        (UnknownToolError("x", hint={"tools": ["a"]}), {"tools": ["a"]}),
    ],
)
def test_hint_policy(error: Any, hint: Any) -> None:
    """Authentication and permission failures drop their hint; correctable ones keep it."""
    assert failure_from_error(error).hint == hint


def test_tool_spec_refuses_bad_definitions() -> None:
    """A spec with a bad name, no roles, no description, a lax params model, or that is both
    read-only and destructive is refused."""

    class Lax(BaseModel):
        model_config = ConfigDict(extra="ignore")

    async def handler(caller: Caller, params: Any) -> dict[str, Any]:
        return {}

    good: dict[str, Any] = {
        "name": "ok_name",
        "description": "d",
        "params": NoParams,
        "roles": frozenset({Role.LEAD}),
        "handler": handler,
    }
    ToolSpec(**good)
    change: dict[str, Any]
    for change in (
        {"name": "Bad-Name"},
        {"name": ""},
        {"roles": frozenset()},
        {"description": " "},
        {"params": Lax},
        {"read_only": True, "destructive": True},
    ):
        with pytest.raises(ValueError, match=r"."):
            ToolSpec(**{**good, **change})


def test_registry_refuses_duplicates_and_reports_unknown_names(registry: ToolRegistry) -> None:
    """A name registers once; get() of an unknown name raises UnknownToolError."""
    with pytest.raises(ValueError, match="already registered"):
        registry.register(registry.get("echo"))
    with pytest.raises(UnknownToolError):
        registry.get("nope")
    assert registry.names() == sorted(registry.names())
    assert [s.name for s in registry.tools_for(Role.OPERATOR)] == ["fleet_list"]


def test_tool_result_is_either_success_or_failure() -> None:
    """A ToolResult cannot be ok with an error, or failed without one."""
    failure = ToolFailure(code="c", message="m")
    assert ToolResult.failure(failure).to_json() == {
        "ok": False,
        "error": {"code": "c", "message": "m"},
    }
    with pytest.raises(ValueError, match="either"):
        ToolResult(ok=True, error=failure)
    with pytest.raises(ValueError, match="either"):
        ToolResult(ok=False)


async def test_an_unknown_tool_name_never_reaches_the_log(caplog: pytest.LogCaptureFixture) -> None:
    """A caller cannot write its own text (a forged log line) into fleetd's log via a tool name."""
    registry = ToolRegistry()
    forged = "a\n2026-12-01 ERROR fleetd FORGED"
    with caplog.at_level(logging.INFO, logger="fleetd.api"):
        result = await registry.call(Caller(role=Role.OPERATOR, name="operator"), forged, {})
    assert result.error is not None
    assert result.error.code == "unknown_tool"
    assert "FORGED" not in caplog.text
    assert "an unknown tool refused" in caplog.text


async def test_a_lone_surrogate_is_named_as_such_not_as_invalid_json() -> None:
    """Valid JSON carrying a lone surrogate is refused as invalid_unicode at its field."""
    registry = build_registry(Calls())
    result = await registry.call(LEAD, "echo", {"text": "half \ud800 a pair"})
    assert result.error is not None
    assert result.error.code == "invalid_arguments"
    [error] = result.error.hint["errors"]
    assert (error["path"], error["type"]) == ("text", "invalid_unicode")
    assert "surrogate" in error["message"]
