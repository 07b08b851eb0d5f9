"""The simulated herdr session: workspaces, tabs, panes, focus, and the retained event log.

Ids are herdr-shaped: workspaces ``w<code>`` (herdr's base-32 alphabet
``123456789ABCDEFGHJKMNPQRSTVWXYZ0``), tabs ``<ws>:t<n>``, panes ``<ws>:p<n>``, terminals
``term_<hex>``. Every structural change appends an event to a 512-entry ring, as herdr's event
hub does; subscriptions and waits read that ring by sequence number. A pane's env is what the
creator passed plus the ``HERDR_*`` variables herdr injects (herdr's values win).

Synchronous and single-threaded: the server calls it from its one event loop.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Mapping
from typing import Any

from fleetd.errors import HerdrError
from fleetd.sim import screens
from fleetd.sim.agent import SimAgent
from fleetd.sim.state import JsonObject, Pane, Tab, Workspace

__all__ = ["RETAINED_EVENTS", "World", "workspace_code"]

RETAINED_EVENTS = 512
_ALPHABET = "123456789ABCDEFGHJKMNPQRSTVWXYZ0"


def workspace_code(number: int) -> str:
    """herdr-style workspace code for the ``number``-th workspace (1 -> ``1``, 33 -> ``21``)."""
    value, digits = number - 1, ""
    while True:
        value, rem = divmod(value, len(_ALPHABET))
        digits = _ALPHABET[rem] + digits
        if value == 0:
            return digits
        value -= 1


class World:
    """All state of one simulated herdr server."""

    def __init__(self, *, socket_path: str, version: str, protocol: int) -> None:
        self.socket_path = socket_path
        self.version = version
        self.protocol = protocol
        self.workspaces: dict[str, Workspace] = {}
        self.tabs: dict[str, Tab] = {}
        self.panes: dict[str, Pane[SimAgent]] = {}
        self.focused_workspace_id: str | None = None
        self.seq = 0
        self.history: deque[tuple[int, JsonObject]] = deque(maxlen=RETAINED_EVENTS)
        self.unlisted: set[str] = set()  # pane ids whose agent agent.list leaves out
        self._ws_numbers = itertools.count(1)
        self._terminals = itertools.count(0x1A2B)
        self._pids = itertools.count(4100)

    # -- events ---------------------------------------------------------------------------

    def emit(self, kind: str, data: Mapping[str, Any]) -> None:
        """Append ``{"event": kind, "data": {"type": kind, ...}}`` to the retained log."""
        self.seq += 1
        self.history.append((self.seq, {"event": kind, "data": {"type": kind, **data}}))

    def events_after(self, seq: int) -> list[tuple[int, JsonObject]]:
        return [(s, e) for s, e in self.history if s > seq]

    def lost_since(self, seq: int) -> bool:
        """True when events after ``seq`` have already left the ring."""
        return bool(self.history) and seq != 0 and self.history[0][0] > seq + 1

    # -- lookups --------------------------------------------------------------------------

    def pane(self, pane_id: str, code: str = "pane_not_found") -> Pane[SimAgent]:
        pane = self.panes.get(pane_id)
        if pane is None:
            raise HerdrError(code, f"pane {pane_id} not found")
        return pane

    def workspace(self, workspace_id: str) -> Workspace:
        ws = self.workspaces.get(workspace_id)
        if ws is None:
            raise HerdrError("workspace_not_found", f"workspace {workspace_id} not found")
        return ws

    def agents(self) -> list[SimAgent]:
        return [p.agent for p in self.panes.values() if p.agent is not None]

    def listed_agents(self) -> list[SimAgent]:
        """The agents ``agent.list`` shows: all but those a test made the list miss."""
        return [a for a in self.agents() if a.pane_id not in self.unlisted]

    def resolve_agent(self, target: str) -> SimAgent:
        """An agent by live name or by the pane id hosting it."""
        named = [a for a in self.agents() if a.name == target]
        if len(named) > 1:
            raise HerdrError("agent_target_ambiguous", f"{target} names several agents")
        if named:
            return named[0]
        pane = self.panes.get(target)
        if pane is not None and pane.agent is not None:
            return pane.agent
        raise HerdrError("agent_not_found", f"agent {target} not found")

    @property
    def focused_tab_id(self) -> str | None:
        ws = self.workspaces.get(self.focused_workspace_id or "")
        return ws.active_tab_id if ws else None

    @property
    def focused_pane_id(self) -> str | None:
        tab = self.tabs.get(self.focused_tab_id or "")
        return tab.focused_pane_id if tab else None

    # -- wire views -------------------------------------------------------------------------

    def pane_wire(self, pane: Pane[SimAgent]) -> JsonObject:
        return pane.to_wire(focused=pane.pane_id == self.focused_pane_id)

    def tab_wire(self, tab: Tab) -> JsonObject:
        statuses = [self.panes[p].agent_status for p in tab.pane_ids if self.panes[p].agent]
        return tab.to_wire(focused=tab.tab_id == self.focused_tab_id, statuses=statuses)

    def workspace_wire(self, ws: Workspace) -> JsonObject:
        panes = [p for p in self.panes.values() if p.workspace_id == ws.workspace_id]
        statuses = [p.agent_status for p in panes if p.agent]
        return ws.to_wire(
            focused=ws.workspace_id == self.focused_workspace_id,
            pane_count=len(panes),
            statuses=statuses,
        )

    def agent_wire(self, agent: SimAgent) -> JsonObject:
        return agent.to_wire(focused=agent.pane.pane_id == self.focused_pane_id)

    def layout_wire(self, tab: Tab) -> JsonObject:
        width = 200 // max(1, len(tab.pane_ids))
        panes = [
            {
                "pane_id": pane_id,
                "focused": pane_id == tab.focused_pane_id,
                "rect": {"x": i * width, "y": 0, "width": width, "height": 50},
            }
            for i, pane_id in enumerate(tab.pane_ids)
        ]
        return {
            "workspace_id": tab.workspace_id,
            "tab_id": tab.tab_id,
            "zoomed": False,
            "area": {"x": 0, "y": 0, "width": 200, "height": 50},
            "focused_pane_id": tab.focused_pane_id or "",
            "panes": panes,
            "splits": [],
        }

    def snapshot_wire(self) -> JsonObject:
        snap: JsonObject = {
            "version": self.version,
            "protocol": self.protocol,
            "workspaces": [self.workspace_wire(w) for w in self.workspaces.values()],
            "tabs": [self.tab_wire(t) for t in self.tabs.values()],
            "panes": [self.pane_wire(p) for p in self.panes.values()],
            "layouts": [self.layout_wire(t) for t in self.tabs.values()],
            "agents": [self.agent_wire(a) for a in self.agents()],
        }
        for key, value in (
            ("focused_workspace_id", self.focused_workspace_id),
            ("focused_tab_id", self.focused_tab_id),
            ("focused_pane_id", self.focused_pane_id),
        ):
            if value is not None:
                snap[key] = value
        return snap

    # -- structure --------------------------------------------------------------------------

    def _new_pane(
        self, ws: Workspace, tab: Tab, cwd: str | None, env: Mapping[str, str]
    ) -> Pane[SimAgent]:
        pane_id = f"{ws.workspace_id}:p{ws.next_pane}"
        ws.next_pane += 1
        pane: Pane[SimAgent] = Pane(
            pane_id=pane_id,
            terminal_id=f"term_{next(self._terminals):08x}",
            workspace_id=ws.workspace_id,
            tab_id=tab.tab_id,
            shell_pid=next(self._pids),
            cwd=cwd,
        )
        pane.env = {
            **dict(env),
            "HERDR_ENV": "1",
            "HERDR_SOCKET_PATH": self.socket_path,
            "HERDR_BIN_PATH": "/usr/local/bin/herdr",
            "HERDR_WORKSPACE_ID": ws.workspace_id,
            "HERDR_TAB_ID": tab.tab_id,
            "HERDR_PANE_ID": pane_id,
        }
        pane.screen = screens.shell(cwd, [])
        self.panes[pane_id] = pane
        tab.pane_ids.append(pane_id)
        if tab.focused_pane_id is None:
            tab.focused_pane_id = pane_id
        self.emit("pane_created", {"pane": self.pane_wire(pane)})
        return pane

    def _new_tab(self, ws: Workspace, label: str | None) -> Tab:
        number = ws.next_tab
        ws.next_tab += 1
        tab = Tab(
            tab_id=f"{ws.workspace_id}:t{number}",
            workspace_id=ws.workspace_id,
            number=number,
            label=label or str(number),
        )
        self.tabs[tab.tab_id] = tab
        ws.tab_ids.append(tab.tab_id)
        if not ws.active_tab_id:
            ws.active_tab_id = tab.tab_id
        return tab

    def create_workspace(
        self, *, cwd: str | None, label: str | None, env: Mapping[str, str], focus: bool
    ) -> tuple[Workspace, Tab, Pane[SimAgent]]:
        number = next(self._ws_numbers)
        ws = Workspace(
            workspace_id=f"w{workspace_code(number)}",
            number=number,
            label=label or (cwd.rstrip("/").rsplit("/", 1)[-1] if cwd else str(number)),
        )
        self.workspaces[ws.workspace_id] = ws
        tab = self._new_tab(ws, None)
        self.emit("workspace_created", {"workspace": self.workspace_wire(ws)})
        self.emit("tab_created", {"tab": self.tab_wire(tab)})
        pane = self._new_pane(ws, tab, cwd, env)
        if focus or self.focused_workspace_id is None:
            self.focus_pane(pane, mark_seen=False)
        return ws, tab, pane

    def create_tab(
        self,
        *,
        workspace_id: str | None,
        cwd: str | None,
        label: str | None,
        env: Mapping[str, str],
        focus: bool,
    ) -> tuple[Tab, Pane[SimAgent]]:
        ws_id = workspace_id or self.focused_workspace_id
        if ws_id is None:
            _, tab, pane = self.create_workspace(cwd=cwd, label=label, env=env, focus=focus)
            return tab, pane
        ws = self.workspace(ws_id)
        tab = self._new_tab(ws, label)
        self.emit("tab_created", {"tab": self.tab_wire(tab)})
        pane = self._new_pane(ws, tab, cwd, env)
        if focus:
            self.focus_pane(pane, mark_seen=False)
        return tab, pane

    def split(
        self,
        *,
        target_pane_id: str | None,
        workspace_id: str | None,
        cwd: str | None,
        env: Mapping[str, str],
        focus: bool,
    ) -> Pane[SimAgent]:
        if target_pane_id is not None:
            origin = self.pane(target_pane_id, "target_pane_not_found")
        else:
            ws = self.workspace(workspace_id) if workspace_id else None
            if ws is None and self.focused_workspace_id is None:
                raise HerdrError("pane_not_found", "no pane to split")
            ws = ws or self.workspaces[self.focused_workspace_id or ""]
            focused = self.tabs[ws.active_tab_id].focused_pane_id
            origin = self.pane(focused or "", "target_pane_not_found")
        ws = self.workspaces[origin.workspace_id]
        tab = self.tabs[origin.tab_id]
        pane = self._new_pane(ws, tab, cwd if cwd is not None else origin.cwd, env)
        self.emit("layout_updated", {"layout": self.layout_wire(tab)})
        if focus:
            self.focus_pane(pane, mark_seen=False)
        return pane

    def close_pane(self, pane_id: str, *, exited: bool = False) -> None:
        """Remove a pane; an emptied tab and then workspace close with it."""
        pane = self.pane(pane_id)
        agent = pane.agent
        if agent is not None:
            agent.stop()
            self.emit(
                "pane_agent_detected",
                {
                    "pane_id": pane_id,
                    "workspace_id": pane.workspace_id,
                    "agent": agent.kind,
                    "released": True,
                    "final_status": str(agent.status),
                },
            )
        pane.alive = False
        del self.panes[pane_id]
        tab = self.tabs[pane.tab_id]
        tab.pane_ids.remove(pane_id)
        if tab.focused_pane_id == pane_id:
            tab.focused_pane_id = tab.pane_ids[0] if tab.pane_ids else None
        if exited:
            self.emit("pane_exited", {"pane_id": pane_id, "workspace_id": pane.workspace_id})
        self.emit("pane_closed", {"pane_id": pane_id, "workspace_id": pane.workspace_id})
        if not tab.pane_ids:
            self._close_tab(tab)

    def _close_tab(self, tab: Tab) -> None:
        ws = self.workspaces[tab.workspace_id]
        del self.tabs[tab.tab_id]
        ws.tab_ids.remove(tab.tab_id)
        self.emit("tab_closed", {"tab_id": tab.tab_id, "workspace_id": ws.workspace_id})
        if ws.active_tab_id == tab.tab_id:
            ws.active_tab_id = ws.tab_ids[0] if ws.tab_ids else ""
        if ws.tab_ids:
            return
        del self.workspaces[ws.workspace_id]
        self.emit("workspace_closed", {"workspace_id": ws.workspace_id})
        if self.focused_workspace_id == ws.workspace_id:
            self.focused_workspace_id = next(iter(self.workspaces), None)

    def focus_pane(self, pane: Pane[SimAgent], *, mark_seen: bool = True) -> None:
        """Move UI focus to ``pane``; an explicit focus marks its agent seen (done -> idle)."""
        ws = self.workspaces[pane.workspace_id]
        tab = self.tabs[pane.tab_id]
        tab.focused_pane_id = pane.pane_id
        if ws.active_tab_id != tab.tab_id:
            ws.active_tab_id = tab.tab_id
            self.emit("tab_focused", {"tab_id": tab.tab_id, "workspace_id": ws.workspace_id})
        if self.focused_workspace_id != ws.workspace_id:
            self.focused_workspace_id = ws.workspace_id
            self.emit("workspace_focused", {"workspace_id": ws.workspace_id})
        self.emit("pane_focused", {"pane_id": pane.pane_id, "workspace_id": ws.workspace_id})
        if mark_seen and pane.agent is not None:
            pane.agent.mark_seen()

    def status_changed(self, agent: SimAgent) -> None:
        """Called by an agent whose wire status just changed."""
        pane = agent.pane
        self.emit(
            "pane_agent_status_changed",
            {
                "pane_id": pane.pane_id,
                "workspace_id": pane.workspace_id,
                "agent_status": str(agent.status),
                "agent": agent.kind,
            },
        )
