"""Answers to herdr's ordinary (one-shot) methods, over the simulated :class:`World`.

Each handler takes typed :class:`~fleetd.sim.requests.Params` and returns the ``result`` object
(``{"type": "<snake_case>", ...}``) or raises :class:`~fleetd.errors.HerdrError` with herdr's
code, which the server turns into an error frame. Blocking waits and subscriptions are the
server's (:mod:`fleetd.sim.server`): they hold their connection.

The :class:`Dispatcher` routes a method by name: ``agent.*`` to
:class:`~fleetd.sim.agent_methods.AgentMethods`, ``pane.*`` to
:class:`~fleetd.sim.pane_methods.PaneMethods`, and answers ``ping``, the session snapshot,
workspaces and tabs itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleetd.clock import Clock
from fleetd.errors import HerdrError
from fleetd.sim.agent import AgentBehaviour
from fleetd.sim.agent_methods import AgentMethods
from fleetd.sim.pane_methods import PaneMethods
from fleetd.sim.requests import Handler, Params
from fleetd.sim.scenario import Scenario
from fleetd.sim.state import JsonObject
from fleetd.sim.world import World

__all__ = ["Dispatcher"]


class Dispatcher:
    """The simulated app loop: one-shot methods by name."""

    def __init__(
        self, *, world: World, scenario: Scenario, clock: Clock, behaviour: AgentBehaviour
    ) -> None:
        self.world = world
        self.agents = AgentMethods(world=world, scenario=scenario, clock=clock, behaviour=behaviour)
        self.panes = PaneMethods(world)
        self.handlers: dict[str, Handler] = {
            "ping": self.ping,
            "session.snapshot": self.session_snapshot,
            "workspace.create": self.workspace_create,
            "workspace.list": self.workspace_list,
            "workspace.get": self.workspace_get,
            "tab.create": self.tab_create,
            "tab.list": self.tab_list,
            **self.agents.table(),
            **self.panes.table(),
        }

    def handle(self, method: str, params: Mapping[str, Any]) -> JsonObject:
        handler = self.handlers.get(method)
        if handler is None:
            raise HerdrError("not_implemented", f"the simulator does not implement {method}")
        return handler(Params(params))

    # -- session, workspaces, tabs ------------------------------------------------------

    def ping(self, p: Params) -> JsonObject:
        return {
            "type": "pong",
            "version": self.world.version,
            "protocol": self.world.protocol,
            "capabilities": {"live_handoff": False, "detached_server_daemon": False},
        }

    def session_snapshot(self, p: Params) -> JsonObject:
        return {"type": "session_snapshot", "snapshot": self.world.snapshot_wire()}

    def workspace_create(self, p: Params) -> JsonObject:
        ws, tab, pane = self.world.create_workspace(
            cwd=p.opt_text("cwd"), label=p.opt_text("label"), env=p.env(), focus=p.flag("focus")
        )
        return {
            "type": "workspace_created",
            "workspace": self.world.workspace_wire(ws),
            "tab": self.world.tab_wire(tab),
            "root_pane": self.world.pane_wire(pane),
        }

    def workspace_list(self, p: Params) -> JsonObject:
        workspaces = [self.world.workspace_wire(w) for w in self.world.workspaces.values()]
        return {"type": "workspace_list", "workspaces": workspaces}

    def workspace_get(self, p: Params) -> JsonObject:
        ws = self.world.workspace(p.text("workspace_id"))
        return {"type": "workspace_info", "workspace": self.world.workspace_wire(ws)}

    def tab_create(self, p: Params) -> JsonObject:
        tab, pane = self.world.create_tab(
            workspace_id=p.opt_text("workspace_id"),
            cwd=p.opt_text("cwd"),
            label=p.opt_text("label"),
            env=p.env(),
            focus=p.flag("focus"),
        )
        return {
            "type": "tab_created",
            "tab": self.world.tab_wire(tab),
            "root_pane": self.world.pane_wire(pane),
        }

    def tab_list(self, p: Params) -> JsonObject:
        ws_id = p.opt_text("workspace_id")
        tabs = [
            self.world.tab_wire(t)
            for t in self.world.tabs.values()
            if ws_id is None or t.workspace_id == ws_id
        ]
        return {"type": "tab_list", "tabs": tabs}
