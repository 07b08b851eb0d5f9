"""One simulated agent process in a pane, and the pluggable behaviour that acts it out.

:class:`SimAgent` owns what herdr would observe about an agent — internal state, the ``seen``
flag, launch flags, ``state_change_seq``, the screen — and the keyboard: typed text collects in
an input buffer, ``enter`` submits it as a prompt (queued if a turn is running), ``esc`` /
``ctrl+c`` interrupt a turn, and at an approval prompt ``enter``/``y``/``1`` approve while
``esc``/``n``/``3`` reject.

*What* the agent does with a launch or a prompt is an :class:`AgentBehaviour`: the simulator
runs ``on_launch`` once after ``agent.start`` and ``on_prompt`` once per submitted prompt, each as
its own task, and cancels them when the pane closes or the turn is interrupted. Behaviours drive
the agent only through its public methods (``set_state``, ``show``, ``sleep``, ``approval``,
``exit``, ``mark_ready`` ...) and can read ``env`` — the pane's environment as given to
``workspace.create`` / ``tab.create`` / ``pane.split`` plus herdr's ``HERDR_*`` variables — for
example to call back into fleetd with a token found there.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Protocol

from fleetd.clock import Clock
from fleetd.herdr.model import AgentStatus
from fleetd.herdr.rules import DEFAULT_START_TIMEOUT_MS
from fleetd.sim import screens
from fleetd.sim.scenario import AgentProfile, Fault
from fleetd.sim.state import AgentState, JsonObject, Pane, wire_status

__all__ = ["AgentBehaviour", "AgentHost", "SimAgent"]

_log = logging.getLogger(__name__)
_APPROVE = frozenset({"enter", "return", "y", "1"})
_REJECT = frozenset({"esc", "escape", "n", "3"})
_INTERRUPT = frozenset({"esc", "escape", "ctrl+c", "c-c"})


class AgentBehaviour(Protocol):
    """What a simulated agent does; see :class:`fleetd.sim.behaviour.ScriptedBehaviour`."""

    async def on_launch(self, agent: SimAgent) -> None:
        """Carry a just-started agent to ready (``agent.mark_ready()``) or to failure."""
        ...

    async def on_prompt(self, agent: SimAgent, text: str) -> None:
        """Act out one turn for ``text``; return when the agent is back at its prompt."""
        ...


class AgentHost(Protocol):
    """What an agent needs from the simulated session around it."""

    def status_changed(self, agent: SimAgent) -> None: ...

    def close_pane(self, pane_id: str, *, exited: bool = False) -> None: ...


class SimAgent:
    """An agent in a pane; see the module docstring."""

    def __init__(
        self,
        *,
        host: AgentHost,
        pane: Pane[SimAgent],
        name: str | None,
        kind: str,
        profile: AgentProfile,
        behaviour: AgentBehaviour,
        clock: Clock,
        args: Sequence[str] = (),
        start_timeout_ms: int | None = None,
    ) -> None:
        self.pane = pane
        self.name = name
        self.kind = kind
        self.profile = profile
        self.clock = clock
        self.args = tuple(args)
        self.start_timeout_ms = start_timeout_ms or DEFAULT_START_TIMEOUT_MS
        self.state = AgentState.UNKNOWN
        self.seen = True
        self.launch_pending = False
        self.interactive_ready = True
        self.state_change_seq = 0
        self.turns = 0
        self.prompt_requests = 0  # agent.prompt requests past herdr's own checks
        self.frame = 0
        self.last_prompt = ""
        self.next_turn_faults: set[Fault] = set()
        self.current_faults: frozenset[Fault] = frozenset()
        self._host = host
        self._behaviour = behaviour
        self._queued: list[str] = []
        self._turn: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._approval: asyncio.Future[bool] | None = None

    # -- facts ----------------------------------------------------------------------------

    @property
    def status(self) -> AgentStatus:
        return wire_status(self.state, self.seen)

    @property
    def env(self) -> Mapping[str, str]:
        """The pane's environment (read-only)."""
        return MappingProxyType(self.pane.env)

    @property
    def cwd(self) -> str | None:
        return self.pane.cwd

    @property
    def pane_id(self) -> str:
        return self.pane.pane_id

    @property
    def alive(self) -> bool:
        return self.pane.alive

    @property
    def busy(self) -> bool:
        return self._turn is not None and not self._turn.done()

    @property
    def title(self) -> str:
        glyph = "⠋" if self.state is AgentState.WORKING else "✳"
        return f"{glyph} {self.name or self.kind}"

    def to_wire(self, *, focused: bool) -> JsonObject:
        wire: dict[str, Any] = {
            "terminal_id": self.pane.terminal_id,
            "agent_status": str(self.status),
            "workspace_id": self.pane.workspace_id,
            "tab_id": self.pane.tab_id,
            "pane_id": self.pane.pane_id,
            "focused": focused,
            "revision": 0,
            "state_change_seq": self.state_change_seq,
            "agent": self.kind,
            "title": self.title,
        }
        if self.name:
            wire["name"] = self.name
        if self.launch_pending:
            wire["launch_pending"] = True
        if self.interactive_ready:
            wire["interactive_ready"] = True
        if self.pane.cwd:
            wire["cwd"] = self.pane.cwd
        return wire

    # -- for behaviours -------------------------------------------------------------------

    async def sleep(self, seconds: float) -> None:
        await self.clock.sleep(seconds)

    async def hang(self) -> None:
        """Never return (until the task is cancelled)."""
        await asyncio.get_running_loop().create_future()

    def show(self, lines: list[str]) -> None:
        self.pane.screen = list(lines)

    def set_state(self, state: AgentState, screen: list[str] | None = None) -> None:
        """Change the internal state; idle after working/blocked is a completion (``done``)."""
        before = self.status
        if state is not AgentState.IDLE:
            self.seen = True
        elif self.state in (AgentState.WORKING, AgentState.BLOCKED):
            self.seen = False
        self.state = state
        if screen is not None:
            self.show(screen)
        self._changed(before)

    def mark_seen(self) -> None:
        before = self.status
        self.seen = True
        self._changed(before)

    def mark_ready(self) -> None:
        self.launch_pending = False
        self.interactive_ready = True
        self.set_state(AgentState.IDLE, screens.idle(self.kind, self.cwd))

    def mark_launch_failed(self) -> None:
        self.launch_pending = False
        self.interactive_ready = False

    async def approval(self) -> bool:
        """Wait until someone answers the approval prompt on screen; True when approved."""
        self._approval = asyncio.get_running_loop().create_future()
        try:
            return await self._approval
        finally:
            self._approval = None

    def exit(self) -> None:
        """The agent process dies and takes its pane with it."""
        if self.alive:
            self._host.close_pane(self.pane_id, exited=True)

    # -- for the simulator ----------------------------------------------------------------

    def launch(self) -> None:
        self.launch_pending = True
        self.interactive_ready = False
        self._spawn(self._behaviour.on_launch(self))

    def submit(self, text: str) -> None:
        """A prompt arrives (typed + Enter); queued while a turn runs."""
        if self.busy:
            self._queued.append(text)
            return
        self.turns += 1
        self.last_prompt = text
        self.current_faults = self.profile.turn_faults(self.turns) | frozenset(
            self.next_turn_faults
        )
        self.next_turn_faults.clear()
        self.pane.scrollback.extend(self.pane.screen)
        del self.pane.scrollback[:-5000]
        self._turn = self._spawn(self._behaviour.on_prompt(self, text))
        self._turn.add_done_callback(self._turn_over)

    def hold_blocked(self, prompt: str = "") -> None:
        """Show an approval prompt now and wait for an answer outside any turn."""
        self.set_state(AgentState.BLOCKED, screens.blocked(self.kind, prompt, self.cwd))
        self._turn = self._spawn(self._answer_block(prompt))
        self._turn.add_done_callback(self._turn_over)

    async def _answer_block(self, prompt: str) -> None:
        approved = await self.approval()
        if approved:
            screen = screens.done(self.kind, prompt, "Done.", elapsed=0, cwd=self.cwd)
        else:
            screen = screens.interrupted(self.kind, prompt, self.cwd)
        self.set_state(AgentState.IDLE, screen)

    def type(self, text: str) -> None:
        self.pane.input_buffer += text

    def press(self, keys: Sequence[str]) -> None:
        for key in keys:
            self._press(key.lower())

    def _press(self, key: str) -> None:
        if self._approval is not None and not self._approval.done():
            if key in _APPROVE or key in _REJECT:
                self._approval.set_result(key in _APPROVE)
            return
        if key in _INTERRUPT and self.busy:
            self.interrupt()
        elif key in ("enter", "return"):
            text, self.pane.input_buffer = self.pane.input_buffer, ""
            if text.strip() and self.interactive_ready:
                self.submit(text)
        elif key in ("backspace", "bs"):
            self.pane.input_buffer = self.pane.input_buffer[:-1]
        elif key == "space":
            self.pane.input_buffer += " "
        elif len(key) == 1:
            self.pane.input_buffer += key

    def interrupt(self) -> None:
        """Esc during a turn: the turn stops and the agent returns to its prompt."""
        self._queued.clear()
        if self._turn is not None and not self._turn.done():
            self._turn.cancel()
        screen = screens.interrupted(self.kind, self.last_prompt, self.cwd)
        self.set_state(AgentState.IDLE, screen)

    def stop(self) -> None:
        """The pane is closing: cancel everything this agent is doing."""
        self._queued.clear()
        for task in list(self._tasks):
            task.cancel()

    def _spawn(self, coro: Any) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._reap)
        return task

    def _reap(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            _log.error("simulated agent %s failed", self.name or self.pane_id,
                       exc_info=task.exception())  # fmt: skip

    def _turn_over(self, task: asyncio.Task[None]) -> None:
        if self._turn is task:
            self._turn = None
        if self._queued and self.alive and not task.cancelled():
            self.submit(self._queued.pop(0))

    def _changed(self, before: AgentStatus) -> None:
        if self.status != before:
            self.state_change_seq += 1
            self._host.status_changed(self)
