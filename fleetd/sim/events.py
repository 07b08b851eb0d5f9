"""herdr's subscriptions and the events it pushes back: the simulator's and the tests' side.

fleetd itself never subscribes (its status poller and health tick read herdr, and the snapshot is
authoritative), so this module lives with the simulator: the simulator pushes these frames, the
tests read them back through :class:`~fleetd.sim.client.SimClient`.

herdr pushes two shapes on an ``events.subscribe`` connection, both without an ``id``:

* global lifecycle kinds, subscribed by a dotted ``type`` alone and pushed with a snake_case
  name and a tagged data object:
  ``{"event": "pane_exited", "data": {"type": "pane_exited", "pane_id": "w1:p2", ...}}``;
* pane-scoped kinds (``pane_id`` required), pushed with the *dotted* name and untagged data:
  ``{"event": "pane.agent_status_changed", "data": {"pane_id": ..., "agent_status": ...}}``.

:func:`parse_event` turns either into a typed value; kinds it does not know become a generic
:class:`HerdrEvent` (forward compatible). Events only trigger an early re-poll in fleetd: the
snapshot stays authoritative. :func:`events_subscribe` is the request,
:func:`decode_stream_line` reads one line after its ack. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fleetd.errors import InvalidResponseError
from fleetd.herdr.model import AgentStatus, Wire, opt_str, req_str
from fleetd.herdr.protocol import Call, decode_frame, raise_error_frame

__all__ = [
    "GLOBAL_KINDS",
    "PANE_SCOPED_KINDS",
    "AgentStatusChanged",
    "Event",
    "HerdrEvent",
    "Subscription",
    "decode_stream_line",
    "events_subscribe",
    "parse_event",
]

GLOBAL_KINDS = frozenset(
    {
        "workspace.created",
        "workspace.updated",
        "workspace.metadata_updated",
        "workspace.renamed",
        "workspace.moved",
        "workspace.reordered",
        "workspace.closed",
        "workspace.focused",
        "worktree.created",
        "worktree.opened",
        "worktree.removed",
        "tab.created",
        "tab.closed",
        "tab.focused",
        "tab.renamed",
        "tab.moved",
        "pane.created",
        "pane.closed",
        "pane.updated",
        "pane.focused",
        "pane.moved",
        "pane.exited",
        "pane.agent_detected",
        "layout.updated",
    }
)
"""Dotted subscription types that take no parameters (pushed as snake_case events)."""

PANE_SCOPED_KINDS = frozenset({"pane.agent_status_changed", "pane.scroll_changed"})
"""Dotted subscription types fleetd builds that need a ``pane_id``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Subscription:
    """One entry of ``events.subscribe``'s ``subscriptions`` list."""

    type: str
    pane_id: str | None = None
    agent_status: AgentStatus | None = None

    def __post_init__(self) -> None:
        if self.type in GLOBAL_KINDS:
            if self.pane_id is not None or self.agent_status is not None:
                raise ValueError(f"{self.type} takes no pane_id or agent_status")
        elif self.type in PANE_SCOPED_KINDS:
            if not self.pane_id:
                raise ValueError(f"{self.type} needs a pane_id")
            if self.agent_status is not None and self.type != "pane.agent_status_changed":
                raise ValueError(f"{self.type} takes no agent_status filter")
        else:
            raise ValueError(f"unsupported subscription type {self.type!r}")

    @classmethod
    def lifecycle(cls, kind: str) -> Subscription:
        """A global kind such as ``pane.exited``."""
        return cls(type=kind)

    @classmethod
    def status_changes(cls, pane_id: str, status: AgentStatus | None = None) -> Subscription:
        """Status changes of one pane, optionally only those reaching ``status``."""
        return cls(type="pane.agent_status_changed", pane_id=pane_id, agent_status=status)

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"type": self.type}
        if self.pane_id is not None:
            wire["pane_id"] = self.pane_id
        if self.agent_status is not None:
            wire["agent_status"] = str(self.agent_status)
        return wire


@dataclass(frozen=True, slots=True, kw_only=True)
class HerdrEvent:
    """A lifecycle event (``pane_exited``, ``pane_closed``, ``pane_agent_detected``, ...).

    ``kind`` is the pushed event name. The ids are lifted from the data whether herdr put them
    at the top (``pane_id``) or inside a nested object (``pane.pane_id``).
    """

    kind: str
    workspace_id: str | None = None
    tab_id: str | None = None
    pane_id: str | None = None
    agent: str | None = None
    agent_status: AgentStatus | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentStatusChanged:
    """A pane-scoped ``pane.agent_status_changed`` push."""

    pane_id: str
    workspace_id: str
    agent_status: AgentStatus
    agent: str | None = None
    title: str | None = None


Event = HerdrEvent | AgentStatusChanged


def _nested_id(data: Wire, key: str, *holders: str) -> str | None:
    direct = opt_str(data, key)
    if direct is not None:
        return direct
    for holder in holders:
        inner = data.get(holder)
        if isinstance(inner, Mapping) and isinstance(inner.get(key), str):
            return str(inner[key])
    return None


def parse_event(frame: Wire) -> Event:
    """Turn one decoded event frame (``{"event": ..., "data": ...}``) into a typed event."""
    kind = req_str(frame, "event")
    data = frame.get("data")
    if not isinstance(data, Mapping):
        data = {}
    if kind == "pane.agent_status_changed":
        return AgentStatusChanged(
            pane_id=req_str(data, "pane_id"),
            workspace_id=opt_str(data, "workspace_id") or "",
            agent_status=AgentStatus.parse(data.get("agent_status")),
            agent=opt_str(data, "agent"),
            title=opt_str(data, "title"),
        )
    status = data.get("agent_status", data.get("final_status"))
    return HerdrEvent(
        kind=kind,
        workspace_id=_nested_id(data, "workspace_id", "pane", "tab", "workspace", "layout"),
        tab_id=_nested_id(data, "tab_id", "pane", "tab", "layout"),
        pane_id=_nested_id(data, "pane_id", "pane"),
        agent=opt_str(data, "agent"),
        agent_status=None if status is None else AgentStatus.parse(status),
    )


def _subscription_started(result: Wire) -> None:
    if result.get("type") != "subscription_started":
        raise InvalidResponseError("invalid_response", "expected subscription_started")


def events_subscribe(subscriptions: Iterable[Subscription]) -> Call[None]:
    """The subscribe request; its parser accepts only the ``subscription_started`` ack."""
    wire = [s.to_wire() for s in subscriptions]
    return Call(
        method="events.subscribe", params={"subscriptions": wire}, parse=_subscription_started
    )


def decode_stream_line(line: bytes | str, *, method: str = "events.subscribe") -> Event | None:
    """One line after a subscription ack: an event, or ``None`` for a frame to skip.

    An error frame on the stream (``events_lost``, ``server_unavailable``) is raised classified.
    """
    frame = decode_frame(line, method=method)
    if "error" in frame:
        raise_error_frame(frame, method)
    if "event" not in frame:
        return None
    return parse_event(frame)
