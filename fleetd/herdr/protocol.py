"""herdr's JSON socket protocol as pure frames (sans-IO).

Theory of operation
-------------------
herdr speaks newline-delimited JSON over a Unix socket, **one request per connection**: the
client writes one ``{"id": "<string>", "method": "<dotted>", "params": {...}}`` line, the server
answers one line and closes. The answer is either
``{"id", "result": {"type": "<snake_case>", ...}}`` or ``{"id", "error": {"code", "message"}}``;
an unparseable request is answered with ``"id": ""``.

This module only turns values into bytes and bytes into values; sockets, timeouts and retries
live in :mod:`fleetd.herdr.client`. A :class:`Call` pairs a method and its params with the parser
of its result, so the adapter stays a loop of "encode, exchange one line, decode".

Errors are classified here, once:

* a code ending in ``_not_found`` (``pane_not_found``, ``agent_not_found``,
  ``agent_pane_not_found``, ...) -> :class:`~fleetd.errors.TargetNotFoundError`: the target is
  gone while the link works;
* ``server_unavailable`` -> :class:`~fleetd.errors.ControlLinkError`: herdr's app loop is gone;
* every other code -> :class:`~fleetd.errors.HerdrError` keeping the code
  (``agent_blocked``, ``agent_not_ready``, ``timeout``, ``invalid_request``, ...).

An answer that is not a JSON object with ``result`` or ``error`` means we are not talking to
herdr's JSON API at all (for instance the binary ``herdr-client.sock``): that is a link failure,
:class:`~fleetd.errors.ControlLinkError` with code ``invalid_response``. A well-formed answer whose
result fleetd cannot read (``{}``, a missing or mistyped field) is an
:class:`~fleetd.errors.InvalidResponseError` ``invalid_response``: herdr did answer this request, so
whatever the request does may have happened. No parser failure escapes as anything else.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from fleetd.errors import ControlLinkError, HerdrError, InvalidResponseError, TargetNotFoundError
from fleetd.herdr.model import (
    AgentInfo,
    AgentStarted,
    AgentStatus,
    ForegroundProcess,
    PaneInfo,
    Pong,
    ProcessInfo,
    ReadResult,
    ReadSource,
    SessionSnapshot,
    SplitDirection,
    TabCreated,
    TabInfo,
    Wire,
    WorkspaceCreated,
    WorkspaceInfo,
)

__all__ = [
    "MAX_REQUEST_BYTES",
    "PROTOCOL_VERSION",
    "AgentInfo",
    "AgentStarted",
    "AgentStatus",
    "Call",
    "ForegroundProcess",
    "PaneInfo",
    "Pong",
    "ProcessInfo",
    "ReadResult",
    "ReadSource",
    "SessionSnapshot",
    "SplitDirection",
    "TabCreated",
    "TabInfo",
    "WorkspaceCreated",
    "WorkspaceInfo",
    "decode_frame",
    "decode_response",
    "encode_request",
    "error_for",
    "raise_error_frame",
]

PROTOCOL_VERSION = 20
"""The herdr protocol these shapes were written against (0.8.x; 22 is compatible for our subset)."""

MAX_REQUEST_BYTES = 1024 * 1024
"""herdr refuses a request line longer than 1 MiB."""

T = TypeVar("T")


def error_for(code: str, message: str = "", *, method: str = "") -> HerdrError:
    """The fleetd error for a herdr error code."""
    if code.endswith("_not_found"):
        return TargetNotFoundError(code, message, method=method)
    if code == "server_unavailable":
        return ControlLinkError(code, message, method=method)
    return HerdrError(code, message, method=method)


def encode_request(request_id: str, method: str, params: Mapping[str, Any]) -> bytes:
    """One request line: compact UTF-8 JSON and a newline. ``params`` is always sent."""
    try:
        line = json.dumps(
            {"id": request_id, "method": method, "params": dict(params)},
            ensure_ascii=False,
            separators=(",", ":"),
        ).encode("utf-8")
    except UnicodeEncodeError:
        raise HerdrError("invalid_params", "text is not valid Unicode", method=method) from None
    if len(line) >= MAX_REQUEST_BYTES:
        raise HerdrError("request_too_large", f"{len(line)} bytes", method=method)
    return line + b"\n"


def decode_frame(line: bytes | str, *, method: str = "") -> Wire:
    """Parse one line into a JSON object, or fail as a link error (not herdr's JSON API)."""
    try:
        frame = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        raise ControlLinkError("invalid_response", "answer is not JSON", method=method) from None
    except RecursionError:  # valid JSON nested deeper than the parser follows
        detail = "answer nested too deep"
        raise ControlLinkError("invalid_response", detail, method=method) from None
    if not isinstance(frame, dict):
        raise ControlLinkError("invalid_response", "answer is not an object", method=method)
    return frame


def raise_error_frame(frame: Wire, method: str) -> None:
    """Raise the classified error an ``{"error": {code, message}}`` frame carries."""
    body = frame.get("error")
    if isinstance(body, Mapping):
        code = body.get("code")
        message = body.get("message")
        raise error_for(
            code if isinstance(code, str) else "unknown_error",
            message if isinstance(message, str) else "",
            method=method,
        )
    raise ControlLinkError("invalid_response", "error without a body", method=method)


def decode_response(line: bytes | str, *, request_id: str, method: str) -> Wire:
    """The ``result`` object of a response line, or the classified error it carries.

    The echoed id must be ours. On an error herdr may also answer with ``""`` (it could not
    parse the request, so it could not echo the id) or a derived id such as
    ``<id>:sub:0:probe`` (a subscription's probe failed).
    """
    frame = decode_frame(line, method=method)
    echoed = frame.get("id")
    if "error" in frame:
        derived = isinstance(echoed, str) and echoed.startswith(f"{request_id}:")
        if echoed not in (request_id, "") and not derived:
            raise ControlLinkError("invalid_response", "answer id mismatch", method=method)
        raise_error_frame(frame, method)
    result = frame.get("result")
    if echoed != request_id or not isinstance(result, Mapping):
        raise ControlLinkError("invalid_response", "not a response to this request", method=method)
    return result


def _no_result(result: Wire) -> None:
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Call(Generic[T]):
    """One herdr method call: what to send and how to read the answer."""

    method: str
    params: Mapping[str, Any] = field(default_factory=dict)
    parse: Callable[[Wire], T]
    decode: Callable[[bytes | str, str], T | None] | None = None
    """A fast reading of the whole answer line for ``request_id``; ``None`` from it (or no
    ``decode`` at all) reads the line the general way: ``decode_response``, then ``parse``."""

    def request_line(self, request_id: str) -> bytes:
        return encode_request(request_id, self.method, self.params)

    def parse_response(self, line: bytes | str, request_id: str) -> T:
        if self.decode is not None and (value := self.decode(line, request_id)) is not None:
            return value
        result = decode_response(line, request_id=request_id, method=self.method)
        try:
            return self.parse(result)
        except InvalidResponseError as exc:
            raise InvalidResponseError(exc.code, exc.message, method=self.method) from None
        except (LookupError, TypeError, ValueError, AttributeError) as exc:
            detail = f"result could not be read ({type(exc).__name__})"
            raise InvalidResponseError("invalid_response", detail, method=self.method) from None

    @staticmethod
    def ok(method: str, params: Mapping[str, Any]) -> Call[None]:
        """A call whose success is ``{"type": "ok"}`` (any result type is accepted)."""
        return Call(method=method, params=params, parse=_no_result)
