"""Answers to herdr's ordinary (one-shot) methods, over the simulated :class:`World`.

Each handler takes typed :class:`~fleetd.sim.requests.Params` and returns the ``result`` object
(``{"type": "<snake_case>", ...}``) or raises :class:`~fleetd.errors.HerdrError` with herdr's
code, which the server turns into an error frame. Blocking waits and subscriptions are the
server's (:mod:`fleetd.sim.server`): they hold their connection.

herdr rules kept here: ``agent.prompt`` refuses an empty text (``empty_agent_prompt``), a
launching agent (``agent_not_ready``) and a blocked one (``agent_blocked``) before typing, and the
scenario's prompt knobs refuse before typing or fail after it (:meth:`Dispatcher.type_prompt`);
``agent.start``
needs an idle shell pane and answers at once with ``launch_pending``; ``agent.read`` of more
``recent`` lines than the screen holds is refused while the agent is not idle
(``agent_not_idle``); focusing marks an agent seen (``done`` becomes ``idle``); reading does not.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fleetd.clock import Clock
from fleetd.errors import HerdrError
from fleetd.herdr.model import AgentStatus, ReadSource
from fleetd.herdr.rules import (
    canonical_kind,
    is_valid_agent_name,
    is_valid_key,
    is_valid_start_timeout,
)
from fleetd.sim import screens
from fleetd.sim.agent import AgentBehaviour, SimAgent
from fleetd.sim.requests import Params
from fleetd.sim.scenario import Scenario
from fleetd.sim.state import AgentState, JsonObject, Pane
from fleetd.sim.world import World

__all__ = ["UNPARSEABLE", "VISIBLE_ROWS", "Dispatcher", "answer_after_typing", "read_pane"]

VISIBLE_ROWS = 40
_RECENT_DEFAULT = 80
_RECENT_CAP = 1000

#: The ``prompt_failure`` value that answers a typed prompt with an empty result, ``{}``.
UNPARSEABLE = "unparseable"

Handler = Callable[[Params], JsonObject]


def answer_after_typing(failure: str | None, result: JsonObject) -> JsonObject:
    """``result``, or the scenario's failure for a prompt that was already typed."""
    if failure == UNPARSEABLE:
        return {}
    if failure is not None:
        raise HerdrError(failure, "simulated failure after the prompt was typed")
    return result


def read_pane(
    pane: Pane[SimAgent], source: ReadSource, lines: int | None, fmt: str = "text"
) -> JsonObject:
    """``pane.read``'s ``read`` object for ``source`` (see PROTOCOL.md §7 "Reading output")."""
    screen = pane.screen[-VISIBLE_ROWS:]
    if source is ReadSource.VISIBLE:
        full = screen
        rows = full if lines is None else full[len(full) - min(lines, len(full)) :]
    elif source is ReadSource.DETECTION:
        full = list(screen)
        while full and not full[-1].strip():
            full.pop()
        rows = full
    else:
        full = [*pane.scrollback, *screen]
        wanted = min(_RECENT_CAP, _RECENT_DEFAULT if lines is None else lines)
        rows = full[len(full) - min(wanted, len(full)) :]
    return {
        "pane_id": pane.pane_id,
        "workspace_id": pane.workspace_id,
        "tab_id": pane.tab_id,
        "source": str(source),
        "format": fmt,
        "text": "\n".join(rows),
        "revision": 0,
        "truncated": len(rows) < len(full),
    }


class Dispatcher:
    """The simulated app loop: one-shot methods by name."""

    def __init__(
        self, *, world: World, scenario: Scenario, clock: Clock, behaviour: AgentBehaviour
    ) -> None:
        self.world = world
        self.scenario = scenario
        self.clock = clock
        self.behaviour = behaviour
        self.handlers: dict[str, Handler] = {
            "ping": self.ping,
            "session.snapshot": self.session_snapshot,
            "workspace.create": self.workspace_create,
            "workspace.list": self.workspace_list,
            "workspace.get": self.workspace_get,
            "tab.create": self.tab_create,
            "tab.list": self.tab_list,
            "agent.list": self.agent_list,
            "agent.get": self.agent_get,
            "agent.focus": self.agent_focus,
            "agent.read": self.agent_read,
            "agent.send_keys": self.agent_send_keys,
            "agent.start": self.agent_start,
            "agent.prompt": self.agent_prompt,
            "pane.list": self.pane_list,
            "pane.get": self.pane_get,
            "pane.current": self.pane_get_current,
            "pane.focus": self.pane_focus,
            "pane.read": self.pane_read,
            "pane.send_text": self.pane_send_text,
            "pane.send_keys": self.pane_send_keys,
            "pane.send_input": self.pane_send_input,
            "pane.split": self.pane_split,
            "pane.close": self.pane_close,
            "pane.process_info": self.pane_process_info,
        }

    def handle(self, method: str, params: Mapping[str, Any]) -> JsonObject:
        handler = self.handlers.get(method)
        if handler is None:
            raise HerdrError("not_implemented", f"the simulator does not implement {method}")
        return handler(Params(params))

    # -- agents -------------------------------------------------------------------------

    def spawn_agent(
        self,
        pane: Pane[SimAgent],
        *,
        name: str | None,
        kind: str,
        args: list[str] | None = None,
        timeout_ms: int | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> SimAgent:
        profile = self.scenario.profile_for(name=name, kind=kind, overrides=overrides)
        agent = SimAgent(
            host=self.world,
            pane=pane,
            name=name,
            kind=kind,
            profile=profile,
            behaviour=self.behaviour,
            clock=self.clock,
            args=args or (),
            start_timeout_ms=timeout_ms,
        )
        pane.agent = agent
        self.world.emit(
            "pane_agent_detected",
            {"pane_id": pane.pane_id, "workspace_id": pane.workspace_id, "agent": kind},
        )
        return agent

    def _agent_info(self, agent: SimAgent, kind: str = "agent_info") -> JsonObject:
        return {"type": kind, "agent": self.world.agent_wire(agent)}

    def agent_list(self, p: Params) -> JsonObject:
        agents = [self.world.agent_wire(a) for a in self.world.agents()]
        return {"type": "agent_list", "agents": agents}

    def agent_get(self, p: Params) -> JsonObject:
        return self._agent_info(self.world.resolve_agent(p.text("target")))

    def agent_focus(self, p: Params) -> JsonObject:
        agent = self.world.resolve_agent(p.text("target"))
        self.world.focus_pane(agent.pane)
        return self._agent_info(agent)

    def agent_read(self, p: Params) -> JsonObject:
        agent = self.world.resolve_agent(p.text("target"))
        source, lines = p.source(), p.opt_int("lines")
        scrolls = source in (ReadSource.RECENT, ReadSource.RECENT_UNWRAPPED)
        long_read = scrolls and lines is not None and lines > VISIBLE_ROWS
        if long_read and agent.state is not AgentState.IDLE:
            raise HerdrError("agent_not_idle", "agent must be idle to read history")
        fmt = p.opt_text("format") or "text"
        return {"type": "pane_read", "read": read_pane(agent.pane, source, lines, fmt)}

    def agent_send_keys(self, p: Params) -> JsonObject:
        agent = self.world.resolve_agent(p.text("target"))
        keys = _keys(p.strings("keys", required=True))
        if not agent.interactive_ready and not agent.launch_pending:
            raise HerdrError("agent_not_ready", "the agent is no longer the pane's occupant")
        agent.press(keys)
        return {"type": "ok"}

    def agent_start(self, p: Params) -> JsonObject:
        name, kind, pane_id = p.text("name"), p.text("kind"), p.text("pane_id")
        args, timeout_ms = p.strings("args"), p.opt_int("timeout_ms")
        if not is_valid_agent_name(name):
            raise HerdrError("invalid_agent_name", "names match [a-z][a-z0-9_-]{0,31}")
        label = canonical_kind(kind)
        if label is None:
            raise HerdrError("unsupported_agent_kind", f"unknown agent kind {kind}")
        if timeout_ms is not None and not is_valid_start_timeout(timeout_ms):
            raise HerdrError("invalid_agent_timeout", "timeout_ms must be >3000 and <=300000")
        if any("\n" in a for a in args):
            raise HerdrError("invalid_agent_argument", "arguments cannot contain newlines")
        pane = self.world.pane(pane_id, "agent_pane_not_found")
        if pane.agent is not None:
            raise HerdrError("agent_pane_busy", "the pane already runs an agent")
        if any(a.name == name for a in self.world.agents()):
            raise HerdrError("agent_name_taken", f"an agent named {name} already exists")
        argv = [label, *args]
        pane.screen = screens.launching(label, argv, pane.cwd)
        agent = self.spawn_agent(pane, name=name, kind=label, args=args, timeout_ms=timeout_ms)
        agent.launch()
        return {"type": "agent_started", "agent": self.world.agent_wire(agent), "argv": argv}

    def check_promptable(self, agent: SimAgent, text: str) -> None:
        if not text:
            raise HerdrError("empty_agent_prompt", "prompt text is empty")
        if agent.launch_pending or not agent.interactive_ready:
            raise HerdrError("agent_not_ready", "the agent is not ready for input")
        if agent.status is AgentStatus.BLOCKED:
            raise HerdrError("agent_blocked", "the agent is waiting for an approval")

    def type_prompt(self, agent: SimAgent, text: str) -> str | None:
        """herdr's checks, then the prompt and Enter typed; the failure to answer after, if any.

        A scenario ``prompt_refusal`` is raised before anything is typed, as herdr's own refusals.
        """
        self.check_promptable(agent, text)
        agent.prompt_requests += 1
        faulted = agent.profile.prompt_faulted(agent.prompt_requests)
        if faulted and agent.profile.prompt_refusal is not None:
            raise HerdrError(agent.profile.prompt_refusal, "simulated refusal, nothing typed")
        agent.type(text)
        agent.press(["enter"])
        return agent.profile.prompt_failure if faulted else None

    def agent_prompt(self, p: Params) -> JsonObject:
        agent = self.world.resolve_agent(p.text("target"))
        failure = self.type_prompt(agent, p.text("text"))
        return answer_after_typing(failure, self._agent_info(agent, "agent_prompted"))

    # -- panes --------------------------------------------------------------------------

    def pane_list(self, p: Params) -> JsonObject:
        ws_id = p.opt_text("workspace_id")
        if ws_id is not None:
            self.world.workspace(ws_id)
        panes = [
            self.world.pane_wire(pane)
            for pane in self.world.panes.values()
            if ws_id is None or pane.workspace_id == ws_id
        ]
        return {"type": "pane_list", "panes": panes}

    def pane_get(self, p: Params) -> JsonObject:
        return {
            "type": "pane_info",
            "pane": self.world.pane_wire(self.world.pane(p.text("pane_id"))),
        }

    def pane_get_current(self, p: Params) -> JsonObject:
        pane_id = p.opt_text("caller_pane_id") or self.world.focused_pane_id or ""
        return {"type": "pane_current", "pane": self.world.pane_wire(self.world.pane(pane_id))}

    def pane_focus(self, p: Params) -> JsonObject:
        self.world.focus_pane(self.world.pane(p.text("pane_id")))
        return {"type": "ok"}

    def pane_read(self, p: Params) -> JsonObject:
        pane = self.world.pane(p.text("pane_id"))
        fmt = p.opt_text("format") or "text"
        return {"type": "pane_read", "read": read_pane(pane, p.source(), p.opt_int("lines"), fmt)}

    def _type_into(self, pane: Pane[SimAgent], text: str, *, newline_is_enter: bool) -> None:
        pieces = text.split("\n") if newline_is_enter else [text]
        for i, piece in enumerate(pieces):
            if i:
                self._press(pane, ["enter"])
            if pane.agent is not None:
                pane.agent.type(piece)
            else:
                pane.input_buffer += piece

    def _press(self, pane: Pane[SimAgent], keys: list[str]) -> None:
        if pane.agent is not None:
            pane.agent.press(keys)
            return
        for key in keys:
            if key.lower() in ("enter", "return"):
                command, pane.input_buffer = pane.input_buffer, ""
                prompt = f"sim@herdr:{pane.cwd or '~'}$ "
                pane.shell_history.append(prompt + command)
                pane.screen = screens.shell(pane.cwd, pane.shell_history[-(VISIBLE_ROWS - 1) :])
            elif len(key) == 1:
                pane.input_buffer += key

    def pane_send_text(self, p: Params) -> JsonObject:
        pane = self.world.pane(p.text("pane_id"))
        self._type_into(pane, p.text("text"), newline_is_enter=True)
        return {"type": "ok"}

    def pane_send_keys(self, p: Params) -> JsonObject:
        pane = self.world.pane(p.text("pane_id"))
        self._press(pane, _keys(p.strings("keys", required=True)))
        return {"type": "ok"}

    def pane_send_input(self, p: Params) -> JsonObject:
        pane = self.world.pane(p.text("pane_id"))
        keys = _keys(p.strings("keys"))
        self._type_into(pane, p.opt_text("text") or "", newline_is_enter=False)
        self._press(pane, keys)
        return {"type": "ok"}

    def pane_split(self, p: Params) -> JsonObject:
        direction = p.text("direction")
        if direction not in ("right", "down"):
            raise HerdrError("invalid_request", f"invalid request: unknown variant `{direction}`")
        pane = self.world.split(
            target_pane_id=p.opt_text("target_pane_id"),
            workspace_id=p.opt_text("workspace_id"),
            cwd=p.opt_text("cwd"),
            env=p.env(),
            focus=p.flag("focus"),
        )
        return {"type": "pane_info", "pane": self.world.pane_wire(pane)}

    def pane_close(self, p: Params) -> JsonObject:
        self.world.close_pane(p.text("pane_id"))
        return {"type": "ok"}

    def pane_process_info(self, p: Params) -> JsonObject:
        pane_id = p.opt_text("pane_id") or self.world.focused_pane_id or ""
        pane = self.world.pane(pane_id)
        agent = pane.agent
        if agent is None:
            proc: JsonObject = {"pid": pane.shell_pid, "name": "bash", "argv": ["bash"]}
            group = pane.shell_pid
        else:
            argv = [agent.kind, *agent.args]
            proc = {
                "pid": pane.shell_pid + 1,
                "name": agent.kind,
                "argv": argv,
                "argv0": agent.kind,
            }
            group = pane.shell_pid + 1
        proc["cmdline"] = " ".join(proc["argv"])
        if pane.cwd:
            proc["cwd"] = pane.cwd
        info = {
            "pane_id": pane.pane_id,
            "shell_pid": pane.shell_pid,
            "foreground_process_group_id": group,
            "tty": f"/dev/pts/{pane.shell_pid % 100}",
            "foreground_processes": [proc],
        }
        return {"type": "pane_process_info", "process_info": info}

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


def _keys(keys: list[str]) -> list[str]:
    for key in keys:
        if not is_valid_key(key):
            raise HerdrError("invalid_key", f"unknown key {key!r}")
    return keys
