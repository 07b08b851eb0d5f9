"""herdr's agents as fleetd last saw them: what ``fleet_list`` shows without asking herdr.

``fleet_list`` makes no herdr call of its own: a dashboard polling it must not load herdr, and
fifty callers must not make fifty ``agent.list``. The control link's observer
(:class:`~fleetd.runtime.link.LinkObserver`) sees every call of the
:class:`~fleetd.herdr.control.AgentControl` port and hands each ``agent.list`` answer and each
``agent.get`` answer to one :class:`LiveAgents`: the last list, each agent updated by any later
answer about it (the status poller reads every busy member four times a second, the push loop
reads the leads). Lists come from the loops that list anyway — the health tick, the orphans check
— and from the ``herdr-agents`` loop, which lists when nothing else has for a while.

:attr:`LiveAgents.listed_at` says how old the list is (``fleet_list.agentsListedAt`` and
``agentsAgeSeconds``); after a failed list :meth:`LiveAgents.rows` is ``None`` (``agents: null``:
herdr cannot list them now) until a list succeeds again. :attr:`LiveAgents.revision` moves with
every list and every shown field that changed, so the fleet view knows when to build again.

Each row is the wire form of its :class:`~fleetd.runtime.fleet_models.LiveAgent` model, made once
and kept while the agent shows the same: a new list makes rows only for the agents that moved, and
the others keep their very row objects (which the encoded view tells apart by identity).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fleetd.bridge.answers import wire
from fleetd.herdr.model import AgentInfo
from fleetd.runtime.fleet_models import LiveAgent

__all__ = ["LiveAgents"]


def _shown(agent: AgentInfo) -> tuple[str | None, str | None, str]:
    """The fields of an agent that ``fleet_list`` shows (besides its pane)."""
    return agent.name, agent.agent, agent.agent_status.value


@dataclass(slots=True)
class LiveAgents:
    """The last ``agent.list``, kept current by later single-agent answers."""

    revision: int = 0
    listed_at: datetime | None = None  # when the last successful list answered
    list_ok: bool = False  # False before the first list and after a failed one
    _listed: Iterable[AgentInfo] = ()  # the last list, indexed only when first needed
    _by_pane: dict[str, AgentInfo] | None = field(default_factory=dict)
    # rows() and statuses() as of a revision: a busy fleet's view reads them once per version
    _shown_at: tuple[int, list[dict[str, Any]], dict[str, str]] | None = None
    # each pane's position in the rows last made (see seen: one agent moved, one row made);
    # empty while two agents share a name (which of their statuses shows is the full pass's)
    _row_of: dict[str, int] = field(default_factory=dict)
    # each pane's row as last made, kept while its agent shows the same (bounded by the last list)
    _made: dict[str, dict[str, Any]] = field(default_factory=dict)

    def listed(self, agents: Iterable[AgentInfo], at: datetime) -> None:
        """A list answered: it replaces what was known (a new observation, a new revision).

        Kept as it came: the health tick that listed pays nothing here; the index by pane is
        built when an answer or a view first needs it."""
        self._listed, self._by_pane = agents, None
        self.listed_at, self.list_ok = at, True
        self.revision += 1

    @property
    def _agents(self) -> dict[str, AgentInfo]:
        if self._by_pane is None:
            self._by_pane = {agent.pane_id: agent for agent in self._listed}
            self._listed = ()
        return self._by_pane

    def list_failed(self) -> None:
        """A list did not answer: the agents are unknown until one does."""
        if self.list_ok:
            self.list_ok = False
            self.revision += 1

    def seen(self, agent: AgentInfo) -> None:
        """One agent's answer; it counts as a change only when a shown field differs."""
        known = self._agents.get(agent.pane_id)
        self._agents[agent.pane_id] = agent
        if known is None or _shown(known) != _shown(agent):
            self.revision += 1
            if known is not None and known.name == agent.name:
                self._moved(agent)

    def _moved(self, agent: AgentInfo) -> None:
        """A known agent's kind or status changed, its name did not (so neither did its place in
        the order): the rows and statuses of the new revision are the last ones with this one
        agent's row made again, not every row. Copies, so a reader of the last revision's rows
        keeps what it read."""
        kept = self._shown_at
        at = self._row_of.get(agent.pane_id)
        if kept is None or kept[0] != self.revision - 1 or at is None:
            return
        rows, statuses = list(kept[1]), kept[2]
        rows[at] = self._made[agent.pane_id] = _row(agent)
        if agent.name:
            statuses = dict(statuses)
            statuses[agent.name] = agent.agent_status.value
        self._shown_at = (self.revision, rows, statuses)

    def rows(self) -> list[dict[str, Any]] | None:
        """The agents as ``fleet_list.agents`` shows them, by name then pane; None when unknown.
        The rows are shared by every read of one revision: read them, do not change them."""
        if not self.list_ok:
            return None
        return list(self._shown()[0])

    def statuses(self) -> dict[str, str]:
        """The last status herdr gave for each named agent (empty when the agents are unknown)."""
        if not self.list_ok:
            return {}
        return dict(self._shown()[1])

    def _shown(self) -> tuple[list[dict[str, Any]], dict[str, str]]:
        """The rows and statuses of this revision, made once: every shown change moves the
        revision (a list, a failed list, an agent seen with a new pane or a changed field)."""
        kept = self._shown_at
        if kept is None or kept[0] != self.revision:
            agents = sorted(self._agents.values(), key=lambda a: (a.name or "", a.pane_id))
            prior, made = self._made, {}
            for a in agents:
                row = prior.get(a.pane_id)
                made[a.pane_id] = row if row is not None and _same(row, a) else _row(a)
            self._made = made
            rows = list(made.values())
            self._row_of = {a.pane_id: n for n, a in enumerate(agents)}
            statuses = {a.name: a.agent_status.value for a in self._agents.values() if a.name}
            if len(statuses) < sum(1 for a in agents if a.name):  # a name twice: no shortcut
                self._row_of = {}
            kept = self._shown_at = (self.revision, rows, statuses)
        return kept[1], kept[2]


def _row(agent: AgentInfo) -> dict[str, Any]:
    """One agent as ``fleet_list.agents`` shows it: its model's wire form."""
    name, kind, status = _shown(agent)
    return wire(LiveAgent.of(name=name, pane_id=agent.pane_id, agent=kind, status=status))


def _same(row: dict[str, Any], agent: AgentInfo) -> bool:
    """Whether ``row`` still shows ``agent`` (its pane is the row's own)."""
    return (row["name"], row["agent"], row["status"]) == _shown(agent)
