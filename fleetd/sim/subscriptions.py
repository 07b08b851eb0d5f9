"""Subscription entries of ``events.subscribe``, polled once per 100 ms tick.

Faithful to herdr 0.8.x (protocol 20): each entry emits at most one event per tick; a global
entry starts at sequence 0 and so first replays the retained history of its kind; a pane-scoped
``pane.agent_status_changed`` entry starts at the current sequence, sends one initial event when
its ``agent_status`` filter already matches, then follows the pane's status changes (transient
ones included, read from the event log) and goes silent if the pane closes. Global events are
pushed with the snake_case name and tagged data; pane-scoped ones with the dotted name and
untagged data. A pane-scoped entry probes its pane at subscribe time; a failed probe answers
with the derived id ``<id>:sub:<index>:probe``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Protocol

from fleetd.errors import HerdrError
from fleetd.sim.events import GLOBAL_KINDS
from fleetd.sim.pane_methods import read_pane
from fleetd.sim.requests import Params
from fleetd.sim.state import JsonObject
from fleetd.sim.world import World

__all__ = ["Entry", "build_entries"]

TICK_SECONDS = 0.1


class Entry(Protocol):
    def poll(self, world: World) -> JsonObject | None: ...


class _GlobalEntry:
    def __init__(self, kind: str) -> None:
        self.kind = kind.replace(".", "_")
        self.cursor = 0

    def poll(self, world: World) -> JsonObject | None:
        if world.lost_since(self.cursor):
            raise HerdrError(
                "events_lost",
                "event subscription fell behind retained history; resubscribe and resync",
            )
        for seq, envelope in world.events_after(self.cursor):
            self.cursor = seq
            if envelope["event"] == self.kind:
                return envelope
        return None


class _StatusEntry:
    def __init__(self, world: World, pane_id: str, wanted: str | None) -> None:
        pane = world.pane(pane_id)
        self.pane_id = pane_id
        self.wanted = wanted
        self.cursor = world.seq
        self.initial: JsonObject | None = None
        if wanted is not None and str(pane.agent_status) == wanted:
            self.initial = _status_event(
                {
                    "pane_id": pane_id,
                    "workspace_id": pane.workspace_id,
                    "agent_status": str(pane.agent_status),
                    **({"agent": pane.agent.kind} if pane.agent else {}),
                }
            )

    def poll(self, world: World) -> JsonObject | None:
        if self.initial is not None:
            event, self.initial = self.initial, None
            return event
        for seq, envelope in world.events_after(self.cursor):
            self.cursor = seq
            data = envelope["data"]
            if envelope["event"] != "pane_agent_status_changed" or data["pane_id"] != self.pane_id:
                continue
            if self.wanted is None or data["agent_status"] == self.wanted:
                return _status_event(data)
        return None


def _status_event(data: Mapping[str, Any]) -> JsonObject:
    untagged = {k: v for k, v in data.items() if k != "type"}
    return {"event": "pane.agent_status_changed", "data": untagged}


class _OutputEntry:
    def __init__(self, world: World, p: Params) -> None:
        self.pane_id = p.text("pane_id")
        self.source = p.source()
        self.lines = p.opt_int("lines")
        match = p.obj("match") or {}
        kind, value = match.get("type"), match.get("value")
        if kind not in ("substring", "regex") or not isinstance(value, str):
            raise HerdrError("invalid_request", "invalid request: bad `match`")
        try:
            self.regex = re.compile(value) if kind == "regex" else None
        except re.error:
            raise HerdrError("invalid_regex", "the regex does not compile") from None
        self.value = value
        self.matching = False
        world.pane(self.pane_id)

    def poll(self, world: World) -> JsonObject | None:
        pane = world.panes.get(self.pane_id)
        if pane is None:
            return None
        read = read_pane(pane, self.source, self.lines)
        hit = next((line for line in read["text"].split("\n") if self._hit(line)), None)
        if hit is None:
            self.matching = False
            return None
        if self.matching:
            return None
        self.matching = True
        data = {"pane_id": self.pane_id, "matched_line": hit, "read": read}
        return {"event": "pane.output_matched", "data": data}

    def _hit(self, line: str) -> bool:
        return bool(self.regex.search(line)) if self.regex else self.value in line


class _SilentEntry:
    """``pane.scroll_changed``: the simulated panes never scroll."""

    def __init__(self, world: World, pane_id: str) -> None:
        world.pane(pane_id)

    def poll(self, world: World) -> JsonObject | None:
        return None


def build_entries(
    world: World, request_id: str, params: Params
) -> list[Entry] | tuple[str, HerdrError]:
    """Every subscription validated and probed, or the probe id and error to answer with.

    Malformed subscriptions raise ``invalid_request`` (answered with the request's own id).
    """
    raw = params.raw.get("subscriptions")
    if not isinstance(raw, list):
        raise HerdrError("invalid_request", "invalid request: missing field `subscriptions`")
    entries: list[Entry] = []
    for index, item in enumerate(raw):
        sub = Params(item if isinstance(item, dict) else {})
        kind = sub.text("type")
        if kind in GLOBAL_KINDS:
            entries.append(_GlobalEntry(kind))
            continue
        if kind not in ("pane.agent_status_changed", "pane.output_matched", "pane.scroll_changed"):
            raise HerdrError("invalid_request", f"invalid request: unknown variant `{kind}`")
        pane_id = sub.text("pane_id")
        try:
            if kind == "pane.agent_status_changed":
                wanted = sub.status("agent_status")
                entries.append(
                    _StatusEntry(world, pane_id, None if wanted is None else str(wanted))
                )
            elif kind == "pane.output_matched":
                entries.append(_OutputEntry(world, sub))
            else:
                entries.append(_SilentEntry(world, pane_id))
        except HerdrError as exc:
            if exc.code == "invalid_request":
                raise
            return f"{request_id}:sub:{index}:probe", exc
    return entries
