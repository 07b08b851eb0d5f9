"""``agent.list`` read straight from the answer's bytes, by schema, keeping unchanged agents.

The health tick lists every agent once per interval; at 10,000 agents herdr's answer is a line of
several megabytes, and reading it through ``json.loads`` (a dict per agent) and then
:meth:`AgentInfo.from_wire <fleetd.herdr.model.AgentInfo.from_wire>` (a dozen checks per agent)
cost more than the rest of the tick. :class:`AgentListDecoder` decodes the line with msgspec into
:class:`WireAgent` values — the fields of herdr's ``AgentInfo`` (``herdr-api.schema.json``) that
fleetd reads; unknown fields are skipped without being built — and hands back the
:class:`AgentInfo` of the previous list for every agent whose fields did not change: between two
ticks almost every agent reads as before, so only the agents that changed are built again.

The fast path never decides anything the general parser would decide differently. It accepts only
a well-formed answer to this request whose every field has the type the schema gives it; anything
else (an error frame, a foreign id, a missing ``terminal_id``, ``"revision": true``, a status
spelled as a number, ...) returns ``None``, and :class:`~fleetd.herdr.protocol.Call` then reads
the line with the general parser, which raises its usual classified error, or reads the lenient
cases (an optional string that is not a string becomes ``None``) the way it always has. The
decoded values hold only strings, numbers and booleans, so they are kept out of the cyclic
collector (``gc=False``): a list of 10,000 agents adds nothing for it to walk.
"""

from __future__ import annotations

from itertools import compress
from operator import ne
from typing import Any

import msgspec

from fleetd.herdr.model import AgentInfo, AgentStatus

__all__ = ["AgentListDecoder", "WireAgent"]


class WireAgent(msgspec.Struct, frozen=True, gc=False):
    """One agent of ``agent.list`` as herdr's schema types the fields fleetd reads."""

    terminal_id: str
    workspace_id: str
    tab_id: str
    pane_id: str
    agent_status: str | None = None
    focused: bool = False
    revision: int | None = 0
    state_change_seq: int | None = 0
    name: str | None = None
    agent: str | None = None
    title: str | None = None
    launch_pending: bool = False
    interactive_ready: bool = False
    cwd: str | None = None

    def info(self) -> AgentInfo:
        """The same :class:`AgentInfo` that ``AgentInfo.from_wire`` builds from these fields."""
        return AgentInfo(
            terminal_id=self.terminal_id,
            agent_status=_STATUSES.get(self.agent_status or "", AgentStatus.UNKNOWN),
            workspace_id=self.workspace_id,
            tab_id=self.tab_id,
            pane_id=self.pane_id,
            focused=self.focused,
            revision=self.revision or 0,
            state_change_seq=self.state_change_seq or 0,
            name=self.name,
            agent=self.agent,
            title=self.title,
            launch_pending=self.launch_pending,
            interactive_ready=self.interactive_ready,
            cwd=self.cwd,
        )


_STATUSES = {status.value: status for status in AgentStatus}


class _AgentList(msgspec.Struct, gc=False):
    agents: list[WireAgent] = []


class _Answer(msgspec.Struct, gc=False):
    """A response line; ``error`` is only noticed (an error frame goes the general way)."""

    id: Any = None
    result: _AgentList | None = None
    error: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


_DECODER = msgspec.json.Decoder(_Answer)


class AgentListDecoder:
    """Reads ``agent.list`` answers, handing back the previous list's :class:`AgentInfo` for every
    agent whose fields are unchanged. What it keeps is the last list only.

    herdr lists agents in a stable order, so an agent is first compared with the one at its
    position in the last list (one comparison of two structs, no hashing); only when the list
    changed length are the last list's agents looked up by value."""

    __slots__ = ("_infos", "_wires")

    def __init__(self) -> None:
        self._wires: list[WireAgent] = []
        self._infos: list[AgentInfo] = []

    def decode(self, line: bytes | str, request_id: str) -> tuple[AgentInfo, ...] | None:
        """The agents of an answer to ``request_id``, or ``None`` for the general parser."""
        try:
            answer = _DECODER.decode(line)
        except msgspec.MsgspecError:
            return None
        if answer.error is not msgspec.UNSET or answer.id != request_id or answer.result is None:
            return None
        wires = answer.result.agents
        if len(wires) == len(self._wires):
            infos = list(self._infos)
            for position in compress(range(len(wires)), map(ne, wires, self._wires)):
                infos[position] = wires[position].info()
        else:
            previous = dict(zip(self._wires, self._infos, strict=True)).get
            infos = [previous(wire) or wire.info() for wire in wires]
        self._wires, self._infos = wires, infos
        return tuple(infos)
