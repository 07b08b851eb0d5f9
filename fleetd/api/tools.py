"""One registry of fleet tools, served the same way over plain HTTP and over MCP.

Both transports authenticate a caller, then hand ``(caller, name, raw_args)`` to
:meth:`ToolRegistry.call`; nothing about a tool is decided twice. A call goes through four gates, in
this order, and each refusal is a *value* the model can read, not an exception it never sees:

1. the tool exists (else ``unknown_tool``; hint: the tools this caller may call),
2. the caller's role may call it (else ``forbidden``; no hint — a role is not something the model
   can correct),
3. the arguments validate against the tool's params model as strict JSON with no extra fields
   (else ``invalid_arguments``; hint: the params JSON Schema and each error as a field path — input
   values are never echoed),
4. the handler runs. A :class:`~fleetd.errors.ToolError` it raises becomes ``{code, message,
   hint?}`` (an :class:`~fleetd.errors.InvalidArgumentsError` gets the hint of gate 3: the params
   schema and the one field error it names); any other exception becomes ``internal_error``
   with no exception text (it is logged locally on ``fleetd.api``).

Recovery hints follow the reliability seed: a correctable failure carries one so the next model
turn can retry with corrected arguments or pick another tool; authentication, permission and
rate-limit failures never do, because only an outside change can fix them.

Every call from an authenticated caller first runs the ``on_contact`` hooks: the bridge counts any
contact from a member (a tool call here, an MCP ``initialize`` in the MCP adapter) as presence.
Every answer is then handed to the ``on_result`` hooks with the tool's name (``None`` for a name
that is not a tool): the composition root counts calls there.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from fleetd.api.failures import HINTLESS_CODES, INTERNAL_ERROR_CODE, error_body
from fleetd.errors import (
    InvalidArgumentsError,
    PermissionDeniedError,
    ToolError,
    UnknownToolError,
)
from fleetd.identity import Caller, Role

__all__ = [
    "INTERNAL_ERROR_CODE",
    "Caller",
    "ContactHook",
    "ResultHook",
    "Role",
    "ToolAnswer",
    "ToolFailure",
    "ToolParams",
    "ToolRegistry",
    "ToolResult",
    "ToolSpec",
    "failure_from_error",
]

logger = logging.getLogger("fleetd.api")

# pydantic error types whose message may quote the rejected value (custom validators).
_FREE_TEXT_ERROR_TYPES = frozenset({"value_error", "assertion_error"})
_TOOL_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


class ToolParams(BaseModel):
    """Base for tool parameter models: frozen, and unknown fields are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


P = TypeVar("P", bound=BaseModel)

#: What a handler answers: its result model, built (the answer is that model's wire JSON, only
#: the fields it was given), or a JSON object another part of fleetd built.
ToolAnswer = BaseModel | Mapping[str, Any]
ToolHandler = Callable[[Caller, P], Awaitable[ToolAnswer]]
ContactHook = Callable[[Caller], Awaitable[None]]
ResultHook = Callable[[str | None, "ToolResult"], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec(Generic[P]):
    """One fleet tool: its name, what it does, its params model, who may call it, and its handler.

    ``result`` optionally names a model the handler's output must satisfy; it is what
    ``contracts/api/<name>.result.schema.json`` is generated from. A handler that builds its
    answer as a model answers that model's wire JSON (camelCase, the fields it was given).
    Validation only checks: the caller receives the handler's output unchanged, and an output
    outside the model is logged as a contract breach, never turned into a failure — the handler's
    work is done and may have had effects (a send accepted, a reply stored) that a caller told
    "failed" could repeat.

    ``read_only``, ``destructive`` and ``idempotent`` say what a call does to the fleet, for
    clients that ask (MCP's tool annotations): a read-only tool changes nothing any other caller
    sees; a destructive one may end something (a member, its pending tasks); an idempotent one
    has no further effect when repeated with the same arguments. A tool is not both read-only
    and destructive.
    """

    name: str
    description: str
    params: type[P]
    roles: frozenset[Role]
    handler: ToolHandler[P]
    result: type[BaseModel] | None = None
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False

    def __post_init__(self) -> None:
        if not _TOOL_NAME.fullmatch(self.name):
            raise ValueError(f"tool name {self.name!r} must match {_TOOL_NAME.pattern}")
        if not self.description.strip():
            raise ValueError(f"tool {self.name}: description is empty")
        if not self.roles:
            raise ValueError(f"tool {self.name}: no role may call it")
        if self.params.model_config.get("extra") != "forbid":
            raise ValueError(f"tool {self.name}: params model must forbid extra fields")
        if self.read_only and self.destructive:
            raise ValueError(f"tool {self.name}: a read-only tool cannot be destructive")

    def params_schema(self) -> dict[str, Any]:
        """The JSON Schema of this tool's arguments."""
        return self.params.model_json_schema()


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolFailure:
    """A model-visible failure: ``code``, ``message`` and, when correctable, a ``hint``.

    ``http_status`` is how the HTTP transport answers; it is not part of the JSON value.
    """

    code: str
    message: str
    hint: Any = None
    http_status: int = 400

    def to_json(self) -> dict[str, Any]:
        """The ``error`` object, written as its :class:`~fleetd.api.failures.ToolErrorBody`."""
        return error_body(self.code, self.message, self.hint)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """What a call produced: ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": ...}``."""

    ok: bool
    result: Mapping[str, Any] | None = None
    error: ToolFailure | None = None

    def __post_init__(self) -> None:
        if self.ok != (self.error is None) or self.ok != (self.result is not None):
            raise ValueError("a ToolResult is either ok with a result or failed with an error")

    @classmethod
    def success(cls, result: Mapping[str, Any]) -> ToolResult:
        return cls(ok=True, result=result)

    @classmethod
    def failure(cls, error: ToolFailure) -> ToolResult:
        return cls(ok=False, error=error)

    def to_json(self) -> dict[str, Any]:
        if self.error is not None:
            return {"ok": False, "error": self.error.to_json()}
        return {"ok": True, "result": dict(self.result or {})}


def failure_from_error(error: ToolError) -> ToolFailure:
    """Turn a tool error into its model-visible value, dropping hints the policy forbids."""
    hint = None if error.code in HINTLESS_CODES else error.hint
    return ToolFailure(code=error.code, message=error.message, hint=hint, http_status=error.status)


def _internal_failure() -> ToolFailure:
    return ToolFailure(
        code=INTERNAL_ERROR_CODE,
        message="the tool failed inside fleetd; the failure is logged on the daemon",
        http_status=500,
    )


@dataclass(slots=True)
class ToolRegistry:
    """The fleet tools, by name. Built once by the composition root; nothing registers at import."""

    _specs: dict[str, ToolSpec[Any]] = field(default_factory=dict)
    on_contact: list[ContactHook] = field(default_factory=list)
    on_result: list[ResultHook] = field(default_factory=list)

    def register(self, spec: ToolSpec[Any]) -> None:
        if spec.name in self._specs:
            raise ValueError(f"tool {spec.name} is already registered")
        self._specs[spec.name] = spec

    def get(self, name: str) -> ToolSpec[Any]:
        try:
            return self._specs[name]
        except KeyError:
            raise UnknownToolError(f"no tool named {_shown(name)}") from None

    def names(self) -> list[str]:
        return sorted(self._specs)

    def specs(self) -> list[ToolSpec[Any]]:
        """Every tool, in name order."""
        return [self._specs[name] for name in self.names()]

    def tools_for(self, role: Role) -> list[ToolSpec[Any]]:
        """The tools ``role`` may call, in name order."""
        return [spec for spec in self.specs() if role in spec.roles]

    async def contact(self, caller: Caller) -> None:
        """Tell every contact hook that ``caller`` reached us. A failing hook never fails a call."""
        for hook in list(self.on_contact):
            try:
                await hook(caller)
            except Exception:  # a presence hook must not break the caller's request
                logger.exception("contact hook failed for a %s caller", caller.role)

    async def call(self, caller: Caller, name: str, raw_args: Mapping[str, Any]) -> ToolResult:
        """Run tool ``name`` for ``caller``; every failure comes back as a value."""
        result = await self._call(caller, name, raw_args)
        self.answered(name, result)
        return result

    def answered(self, name: str, result: ToolResult) -> None:
        """Hand an answer to the result hooks (a transport that answered from a cache says so
        here, so that every answer is counted once)."""
        tool = name if name in self._specs else None
        for hook in list(self.on_result):
            hook(tool, result)

    async def _call(self, caller: Caller, name: str, raw_args: Mapping[str, Any]) -> ToolResult:
        await self.contact(caller)
        try:
            spec = self._authorised(caller, name)
            params = _validate(spec, raw_args)
        except ToolError as error:
            shown = name if name in self._specs else "an unknown tool"  # never echo caller text
            logger.info("%s refused for a %s caller: %s", shown, caller.role, error.code)
            return ToolResult.failure(failure_from_error(error))
        try:
            output = _wire(await spec.handler(caller, params))
        except ToolError as error:
            logger.info("tool %s failed for a %s caller: %s", name, caller.role, error.code)
            return ToolResult.failure(_handler_failure(spec, error))
        except Exception:  # the one place a handler bug becomes internal_error
            logger.exception("tool %s raised inside its handler", name)
            return ToolResult.failure(_internal_failure())
        _check_result(spec, output)
        return ToolResult.success(output)

    def _authorised(self, caller: Caller, name: str) -> ToolSpec[Any]:
        spec = self._specs.get(name)
        if spec is None:
            raise UnknownToolError(
                f"no tool named {_shown(name)}",
                hint={"tools": [s.name for s in self.tools_for(caller.role)]},
            )
        if caller.role not in spec.roles:
            raise PermissionDeniedError(f"the {caller.role} role may not call {name}")
        return spec


MAX_ARGUMENTS = 64
"""More arguments than this are refused before validation: every tool takes a handful."""
MAX_FIELD_ERRORS = 20
"""A refusal lists at most this many field errors (``errorsOmitted`` counts the rest)."""

#: The log line a result outside its declared model leaves (the suite fails any test that logs it).
RESULT_BREACH = "tool %s answered outside its result contract at %s"


def _wire(answer: ToolAnswer) -> Mapping[str, Any]:
    """A handler's answer as the JSON object it stands for."""
    if isinstance(answer, BaseModel):
        document: dict[str, Any] = answer.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return document
    return answer


def _check_result(spec: ToolSpec[Any], output: Mapping[str, Any]) -> None:
    """Check ``output`` against the tool's result model; a breach is logged (field paths only)."""
    if spec.result is None:
        return
    try:
        spec.result.model_validate(output)
    except ValidationError as error:
        paths = sorted({e["path"] or "(root)" for e in _field_errors(error)})
        logger.error(RESULT_BREACH, spec.name, ", ".join(paths))


def _handler_failure(spec: ToolSpec[Any], error: ToolError) -> ToolFailure:
    """A handler's refusal; ``invalid_arguments`` gets the same hint as a schema refusal."""
    failure = failure_from_error(error)
    if isinstance(error, InvalidArgumentsError):
        return dataclasses.replace(failure, hint=_one_error_hint(spec, error))
    return failure


def _one_error_hint(spec: ToolSpec[Any], error: InvalidArgumentsError) -> dict[str, Any]:
    """The ``invalid_arguments`` hint of one error: the tool's params schema and that error."""
    return {"schema": spec.params_schema(), "errors": [error.field_error()]}


def _validate(spec: ToolSpec[Any], raw_args: Mapping[str, Any]) -> BaseModel:
    """Validate ``raw_args`` as strict JSON against the tool's params model."""
    model: type[BaseModel] = spec.params
    if len(raw_args) > MAX_ARGUMENTS:  # before any walk of them: never one error per key
        raise _one_refusal(
            spec,
            f"{len(raw_args)} arguments; {spec.name} takes at most {len(model.model_fields)}",
            rule="too_many_arguments",
        )
    broken = _lone_surrogate_at(raw_args, "")
    if broken is not None:  # valid JSON, but not text that can travel (herdr, AMQP: UTF-8)
        raise _one_refusal(
            spec,
            "text is not valid Unicode (a lone surrogate)",
            path=broken,
            rule="invalid_unicode",
        )
    try:
        document = json.dumps(dict(raw_args))
    except (TypeError, ValueError, RecursionError):  # RecursionError: nested past the stack
        raise InvalidArgumentsError(
            f"arguments to {spec.name} are not plain JSON",
            hint={"schema": spec.params_schema(), "errors": []},
        ) from None
    try:
        return model.model_validate_json(document, strict=True)
    except ValidationError as error:
        errors = _field_errors(error)
        hint: dict[str, Any] = {"schema": spec.params_schema(), "errors": errors}
        if error.error_count() > len(errors):
            hint["errorsOmitted"] = error.error_count() - len(errors)
        raise InvalidArgumentsError(
            f"arguments do not match the parameters of {spec.name}", hint=hint
        ) from None


def _one_refusal(
    spec: ToolSpec[Any], message: str, *, rule: str, path: str = ""
) -> InvalidArgumentsError:
    """An ``invalid_arguments`` refusal of one error, with the tool's params schema."""
    error = InvalidArgumentsError(message, path=path, rule=rule)
    error.hint = _one_error_hint(spec, error)
    return error


BODY_READ_SECONDS = 30.0
"""A request body must arrive within this long (HTTP tools and MCP alike): a client that stalls
mid-body is answered 408 and its partial body let go, never held."""


def body_too_slow() -> ToolFailure:
    """The refusal of a request body that did not arrive within :data:`BODY_READ_SECONDS`."""
    return ToolFailure(
        code="request_timeout",
        message=f"the request body did not arrive within {BODY_READ_SECONDS:g} seconds",
        http_status=408,
    )


def declares_more_than(content_length: str, limit: int) -> bool:
    """Whether a request's ``Content-Length`` header value declares a body past ``limit`` bytes
    (refused before a byte of it is read; an unreadable value is left to the read's own bound)."""
    return content_length.isascii() and content_length.isdigit() and int(content_length) > limit


def body_too_large(limit: int) -> ToolFailure:
    """The refusal of a request body past ``limit`` bytes (HTTP tools and MCP alike)."""
    return ToolFailure(
        code="body_too_large",
        message=f"the request body is larger than {limit} bytes",
        hint={"maxBytes": limit},
        http_status=413,
    )


#: At most this much of a name the caller sent is said back to it.
_SHOWN_CHARS = 64


def _shown(name: str) -> str:
    """``name`` as said back to its caller: quoted, and cut short when long (a name from a URL
    can be as long as the request line)."""
    if len(name) <= _SHOWN_CHARS:
        return repr(name)
    return f"{name[:_SHOWN_CHARS]!r}... ({len(name)} characters)"


def _lone_surrogate_at(value: object, path: str) -> str | None:
    """The dotted path of the first string that cannot be encoded as UTF-8, if any. Walked with
    a stack of its own, so JSON nested as deep as the body allows cannot exhaust Python's."""
    stack: list[tuple[object, str]] = [(value, path)]
    while stack:
        value, path = stack.pop()
        if isinstance(value, str):
            if not _encodes(value):
                return path
            continue
        items: list[tuple[str, object]] = []
        if isinstance(value, Mapping):
            items = [(str(k), v) for k, v in value.items()]
        elif isinstance(value, list | tuple):
            items = [(str(i), v) for i, v in enumerate(value)]
        for key, _item in items:
            if not _encodes(key):
                return path  # a key we cannot even name: the object that holds it
        # pushed last first, so the first item is looked at first
        stack.extend((item, f"{path}.{key}" if path else key) for key, item in reversed(items))
    return None


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _field_errors(error: ValidationError) -> list[dict[str, str]]:
    """The first :data:`MAX_FIELD_ERRORS` validation errors as ``{path, type, message}``; never
    the rejected value."""
    found = []
    items = error.errors(include_url=False, include_context=False, include_input=False)
    for item in items[:MAX_FIELD_ERRORS]:
        kind = item["type"]
        message = "invalid value" if kind in _FREE_TEXT_ERROR_TYPES else item["msg"]
        path = ".".join(str(part) for part in item["loc"])
        found.append({"path": path, "type": kind, "message": message})
    return found
