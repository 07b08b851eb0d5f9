"""Reading request lines the way herdr's server does, refusals included.

herdr deserialises the whole line into a typed request (serde, adjacently tagged on
``method``/``params``). When that fails it still tries to recover a *string* ``id`` from a line
that starts with ``{`` so the error can be correlated; invalid JSON and non-string ids are
answered with ``"id": ""``. All such failures are ``invalid_request`` with a serde-like message
(``invalid request: missing field `pane_id```). :class:`Params` gives handlers typed access that
fails the same way.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fleetd.errors import HerdrError
from fleetd.herdr.model import AgentStatus, ReadSource

__all__ = ["KNOWN_METHODS", "Handler", "Params", "Request", "parse_request"]

KNOWN_METHODS = frozenset(
    [
        "ping",
        "server.stop",
        "server.live_handoff",
        "server.reload_config",
        "server.agent_manifests",
        "server.reload_agent_manifests",
        "notification.show",
        "client.window_title.set",
        "client.window_title.clear",
        "session.snapshot",
        "workspace.create",
        "workspace.list",
        "workspace.get",
        "workspace.focus",
        "workspace.rename",
        "workspace.move",
        "workspace.move_block",
        "workspace.report_metadata",
        "workspace.close",
        "worktree.list",
        "worktree.create",
        "worktree.open",
        "worktree.remove",
        "tab.create",
        "tab.list",
        "tab.get",
        "tab.focus",
        "tab.rename",
        "tab.move",
        "tab.close",
        "agent.list",
        "agent.get",
        "agent.read",
        "agent.explain",
        "agent.send_keys",
        "agent.rename",
        "agent.view.set",
        "agent.view.clear",
        "agent.focus",
        "agent.start",
        "agent.prompt",
        "agent.wait",
        "pane.split",
        "pane.swap",
        "pane.move",
        "pane.zoom",
        "pane.layout",
        "pane.process_info",
        "layout.export",
        "layout.apply",
        "layout.set_split_ratio",
        "pane.neighbor",
        "pane.edges",
        "pane.focus_direction",
        "pane.resize",
        "pane.list",
        "pane.current",
        "pane.get",
        "pane.focus",
        "pane.input.set",
        "pane.rename",
        "pane.send_text",
        "pane.send_keys",
        "pane.send_input",
        "pane.read",
        "pane.graphics.set",
        "pane.graphics.clear",
        "pane.graphics.info",
        "pane.report_agent",
        "pane.report_agent_session",
        "pane.report_metadata",
        "pane.clear_agent_authority",
        "pane.release_agent",
        "pane.close",
        "popup.close",
        "events.subscribe",
        "events.wait",
        "pane.wait_for_output",
        "integration.install",
        "integration.uninstall",
        "plugin.link",
        "plugin.list",
        "plugin.unlink",
        "plugin.enable",
        "plugin.disable",
        "plugin.action.list",
        "plugin.action.invoke",
        "plugin.log.list",
        "plugin.pane.open",
        "plugin.pane.focus",
        "plugin.pane.close",
    ]
)
"""Every method herdr 0.8.2 (protocol 20) accepts."""


def _invalid(detail: str) -> HerdrError:
    return HerdrError("invalid_request", f"invalid request: {detail}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    id: str
    method: str
    params: Mapping[str, Any]


def parse_request(line: bytes) -> Request | tuple[str, HerdrError]:
    """A typed request, or the id to answer with and the ``invalid_request`` error."""
    text = line.decode("utf-8", errors="replace").strip()
    try:
        frame = json.loads(text)
    except ValueError:
        return "", _invalid("expected value at line 1 column 1")
    recovered = ""
    if text.startswith("{") and isinstance(frame, dict) and isinstance(frame.get("id"), str):
        recovered = frame["id"]
    if not isinstance(frame, dict):
        return "", _invalid("invalid type: expected struct Request")
    if "id" not in frame:
        return "", _invalid("missing field `id`")
    if not isinstance(frame["id"], str):
        return "", _invalid(f"invalid type: {type(frame['id']).__name__}, expected a string")
    method = frame.get("method")
    if not isinstance(method, str):
        return recovered, _invalid("missing field `method`")
    if method not in KNOWN_METHODS:
        return recovered, _invalid(f"unknown variant `{method}`, expected one of `ping`, ...")
    params = frame.get("params")
    if not isinstance(params, dict):
        return recovered, _invalid("missing field `params`")
    return Request(id=frame["id"], method=method, params=params)


class Params:
    """Typed access to a request's params; a bad value fails like herdr's deserialiser."""

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self.raw = raw

    def text(self, key: str) -> str:
        value = self.raw.get(key)
        if value is None:
            raise _invalid(f"missing field `{key}`")
        if not isinstance(value, str):
            raise _invalid(f"invalid type for `{key}`, expected a string")
        return value

    def opt_text(self, key: str) -> str | None:
        return None if self.raw.get(key) is None else self.text(key)

    def opt_int(self, key: str) -> int | None:
        value = self.raw.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise _invalid(f"invalid value for `{key}`, expected an unsigned integer")
        return value

    def flag(self, key: str, default: bool = False) -> bool:
        value = self.raw.get(key, default)
        if not isinstance(value, bool):
            raise _invalid(f"invalid type for `{key}`, expected a boolean")
        return value

    def strings(self, key: str, *, required: bool = False) -> list[str]:
        value = self.raw.get(key)
        if value is None:
            if required:
                raise _invalid(f"missing field `{key}`")
            return []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise _invalid(f"invalid type for `{key}`, expected a sequence of strings")
        return value

    def env(self, key: str = "env") -> dict[str, str]:
        value = self.raw.get(key) or {}
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise _invalid(f"invalid type for `{key}`, expected a map of strings")
        return {str(k): v for k, v in value.items()}

    def source(self, key: str = "source") -> ReadSource:
        value = self.text(key)
        if value not in ReadSource._value2member_map_:
            raise _invalid(f"unknown variant `{value}`, expected one of `visible`, `recent`, "
                           "`recent_unwrapped`, `detection`")  # fmt: skip
        return ReadSource(value)

    def statuses(self, key: str) -> list[AgentStatus] | None:
        values = self.raw.get(key)
        if values is None:
            return None
        names = self.strings(key)
        for name in names:
            if name not in AgentStatus._value2member_map_:
                raise _invalid(f"unknown variant `{name}` for `{key}`")
        return [AgentStatus(n) for n in names]

    def status(self, key: str) -> AgentStatus | None:
        value = self.opt_text(key)
        if value is None:
            return None
        if value not in AgentStatus._value2member_map_:
            raise _invalid(f"unknown variant `{value}` for `{key}`")
        return AgentStatus(value)

    def obj(self, key: str) -> Mapping[str, Any] | None:
        value = self.raw.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise _invalid(f"invalid type for `{key}`, expected a map")
        return value


Handler = Callable[[Params], dict[str, Any]]
"""A one-shot method: typed params in, herdr's ``result`` object out (or a ``HerdrError``)."""
