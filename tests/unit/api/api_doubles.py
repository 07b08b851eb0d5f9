"""Test doubles for the API tests: a small tool registry that records every handler invocation."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from pydantic import BaseModel, Field

from fleetd.api.tools import Caller, Role, ToolParams, ToolRegistry, ToolSpec
from fleetd.errors import CapacityError, ConflictError, PermissionDeniedError, UnknownTargetError

LEAD_TOKEN = "lead-token-0123456789abcdef"
OTHER_LEAD_TOKEN = "lead-token-fedcba9876543210"
OPERATOR_TOKEN = "operator-token-0123456789ab"
SECRET_IN_HANDLER = "handler-secret-do-not-leak"


class EchoParams(ToolParams):
    text: str
    times: int = Field(default=1, ge=1, le=5)
    mode: Literal["plain", "loud"] = "plain"


class ReplyParams(ToolParams):
    content: str


class NoParams(ToolParams):
    pass


class TargetParams(ToolParams):
    target: str


class ListResult(BaseModel):
    sessions: list[str]


class Calls:
    """Every handler invocation, as ``(tool, caller, params)``."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Caller, BaseModel]] = []

    def names(self) -> list[str]:
        return [name for name, _, _ in self.seen]


def build_registry(calls: Calls) -> ToolRegistry:
    """echo (leads), fleet_reply (members), fleet_list (leads, operator), and failing tools."""

    async def echo(caller: Caller, params: EchoParams) -> dict[str, Any]:
        calls.seen.append(("echo", caller, params))
        text = params.text.upper() if params.mode == "loud" else params.text
        return {"echo": " ".join([text] * params.times), "by": caller.name}

    async def reply(caller: Caller, params: ReplyParams) -> dict[str, Any]:
        calls.seen.append(("fleet_reply", caller, params))
        return {"accepted": True, "sessionId": caller.session_id}

    async def fleet_list(caller: Caller, params: NoParams) -> dict[str, Any]:
        calls.seen.append(("fleet_list", caller, params))
        return {"sessions": ["s-1", "s-2"]}

    async def find(caller: Caller, params: TargetParams) -> dict[str, Any]:
        calls.seen.append(("find", caller, params))
        if params.target == "busy":
            raise ConflictError("the session is busy", hint={"retry": "after its turn ends"})
        if params.target == "full":
            raise CapacityError("the profile is at maxLoad")
        if params.target == "sneaky":
            raise PermissionDeniedError("not yours", hint={"ask": "someone"})
        raise UnknownTargetError(
            f"no live session {params.target!r}", hint={"targets": ["s-1", "s-2"]}
        )

    async def boom(caller: Caller, params: NoParams) -> dict[str, Any]:
        calls.seen.append(("boom", caller, params))
        raise RuntimeError(SECRET_IN_HANDLER)

    async def bad_shape(caller: Caller, params: NoParams) -> dict[str, Any]:
        calls.seen.append(("bad_shape", caller, params))
        return {"sessions": "not-a-list"}

    lead = frozenset({Role.LEAD})
    registry = ToolRegistry()
    registry.register(
        ToolSpec(name="echo", description="Echo text.", params=EchoParams, roles=lead, handler=echo)
    )
    registry.register(
        ToolSpec(
            name="fleet_reply",
            description="Answer the lead.",
            params=ReplyParams,
            roles=frozenset({Role.MEMBER}),
            handler=reply,
        )
    )
    registry.register(
        ToolSpec(
            name="fleet_list",
            description="List the fleet.",
            params=NoParams,
            roles=frozenset({Role.LEAD, Role.OPERATOR}),
            handler=fleet_list,
            result=ListResult,
        )
    )
    registry.register(
        ToolSpec(
            name="find", description="Find a target.", params=TargetParams, roles=lead, handler=find
        )
    )
    registry.register(
        ToolSpec(
            name="boom", description="Always fails.", params=NoParams, roles=lead, handler=boom
        )
    )
    registry.register(
        ToolSpec(
            name="bad_shape",
            description="Returns the wrong shape.",
            params=NoParams,
            roles=lead,
            handler=bad_shape,
            result=ListResult,
        )
    )
    return registry


LEAD = Caller(role=Role.LEAD, name="alpha")
MEMBER = Caller(role=Role.MEMBER, name="worker-1", session_id="s-1")
OPERATOR = Caller(role=Role.OPERATOR, name="operator")


async def raw_call(
    app: Any, method: str, path: str, headers: list[tuple[bytes, bytes]], body: list[bytes]
) -> tuple[int, dict[bytes, bytes], bytes, int]:
    """Call ``app`` as a server would, with a lead's token and the body in ``body``'s chunks and
    then nothing more (a client that stalls mid-body); the status, headers, body answered and
    how many body chunks were asked for."""
    chunks = [{"type": "http.request", "body": part, "more_body": True} for part in body]
    asked = 0
    stalled = asyncio.Event()

    async def receive() -> dict[str, Any]:
        nonlocal asked
        asked += 1
        if chunks:
            return chunks.pop(0)
        await stalled.wait()  # never set: the client sends nothing more
        raise AssertionError("unreachable")

    answer: dict[str, Any] = {"headers": {}, "body": b""}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
            answer["headers"] = dict(message.get("headers", []))
        else:
            answer["body"] += message.get("body", b"")

    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "scheme": "http",
        "query_string": b"",
        "headers": [(b"authorization", f"Bearer {LEAD_TOKEN}".encode()), *headers],
        "client": ("127.0.0.1", 1),
        "server": ("fleetd.test", 80),
        "http_version": "1.1",
    }
    await app(scope, receive, send)
    return answer["status"], answer["headers"], answer["body"], asked
