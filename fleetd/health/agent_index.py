"""Live agents by terminal id, carried from one health tick to the next."""

from __future__ import annotations

from itertools import compress
from operator import attrgetter, is_not

from fleetd.health.snapshot import LiveAgent

__all__ = ["AgentIndex"]

_TERMINAL = attrgetter("terminal_id")


class AgentIndex:
    """A tick's live agents by terminal id, carried to the next tick like the member index.

    Between two ticks of a large fleet most agents are the previous list's very objects (the
    runtime hands back an unchanged agent as the same object), so when the list kept its length
    and every agent that is a new object kept its terminal, the next tick updates this index at
    those terminals instead of indexing the whole list again. An index serves one tick: the next
    takes it over in place (``spent``), so a state passed to ``decide`` twice indexes afresh.
    """

    __slots__ = ("agents", "by_terminal", "spent")

    def __init__(self, agents: tuple[LiveAgent, ...], by_terminal: dict[str, LiveAgent]) -> None:
        self.agents = agents
        self.by_terminal = by_terminal
        self.spent = False

    @classmethod
    def of(cls, agents: tuple[LiveAgent, ...], prior: AgentIndex | None) -> AgentIndex:
        """The index of ``agents``, taken over from ``prior`` when it lines up."""
        if (
            prior is not None
            and not prior.spent
            and len(agents) == len(prior.agents) == len(prior.by_terminal)  # no terminal twice
        ):
            prior.spent = True
            before = prior.agents
            moved = list(compress(range(len(agents)), map(is_not, agents, before)))
            if all(agents[p].terminal_id == before[p].terminal_id for p in moved):
                index = prior.by_terminal
                for position in moved:
                    agent = agents[position]
                    index[agent.terminal_id] = agent
                return cls(agents, index)
        return cls(agents, _by_terminal(agents))


def _by_terminal(agents: tuple[LiveAgent, ...]) -> dict[str, LiveAgent]:
    index = dict(zip(map(_TERMINAL, agents), agents, strict=True))
    if len(index) != len(agents):  # ambiguous herdr data: the smallest pane id wins
        for agent in sorted(agents, key=lambda a: a.pane_id, reverse=True):
            index[agent.terminal_id] = agent
    return index
