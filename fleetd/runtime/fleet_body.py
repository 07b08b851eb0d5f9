"""The encoded answer of ``GET /v1/fleet``, assembled from rows kept between versions.

:class:`~fleetd.runtime.fleet_view.FleetViewBuilder` cuts the view as a dict, which the
``fleet_list`` tool answers with. ``GET /v1/fleet`` answers with the same document's bytes, and a
busy fleet asks for them many times a second, each time a member or two changed. So the encoded
view keeps each member row and each herdr agent row as its JSON text
(:class:`~fleetd.runtime.fleet_rows.RowCache`), with the stamp of what it was built from, and a
version encodes again only the rows whose stamp moved; every age is filled in from the version's
``now``. The rest of the view — the control link, capacity, leads, inbox, incidents, config,
dependencies, a lead's preserved worktrees — is small and cut by
:meth:`~fleetd.runtime.fleet_view.FleetViewBuilder.scoped` as for the tool, then encoded with the
kept rows spliced in. Rows are kept per row, not per caller: each scope's body takes the rows its
caller may see when it is assembled. The body is byte for byte what encoding the tool's document
gives (``tests/unit/runtime/test_fleet_body.py`` compares them).

A member row's stamp is everything :meth:`~fleetd.runtime.fleet_view.FleetViewBuilder.member_row`
reads: the session (a frozen value the bridge's roster replaces on every change, so the same object
means no change), its open turn's revision and its ticket's delivery, its pending tickets, the
poller's and herdr's last status, its queue's length, its
:class:`~fleetd.health.snapshot.MemberView` (the same object while unchanged, and the one the idle
rule reads), its health evidence, and its profile's bench. Rows of sessions the roster no longer
holds go with the next version, so what is kept is bounded by the roster and by herdr's last list.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from itertools import compress, count
from operator import is_not
from typing import Any

from fleetd.bridge.sessions import Session
from fleetd.health.snapshot import MemberView
from fleetd.identity import Caller, Role
from fleetd.runtime.fleet_rows import (
    OpenRow,
    RowCache,
    Slot,
    encode,
    marker,
    micros,
    open_row,
)
from fleetd.runtime.fleet_view import FleetFacts, FleetReading, FleetViewBuilder

__all__ = ["EncodedFleet", "FleetBodies"]


@dataclass(frozen=True, slots=True, kw_only=True)
class EncodedFleet:
    """One version's facts with its member and agent rows as text: ``members`` is ``(owner,
    name, text)``, ``agents`` ``(name, text)`` (``None`` when herdr's agents are unknown)."""

    facts: FleetFacts
    members: tuple[tuple[str, str, str], ...]
    agents: tuple[tuple[str | None, str], ...] | None


class FleetBodies:
    """Reads a version (:meth:`read`) and assembles each caller's body of it (:meth:`body`)."""

    def __init__(self, builder: FleetViewBuilder) -> None:
        self._builder = builder
        self.members = RowCache()
        self.agents = RowCache()
        # the agent rows last read and their texts: herdr's rows are the same objects until
        # what herdr shows of that agent changes (LiveAgents keeps them across lists)
        self._listed: tuple[list[dict[str, Any]], tuple[tuple[str | None, str], ...]] | None = None

    async def read(self, version: int) -> EncodedFleet:
        """The facts of ``version`` with every member and agent row as text, encoding again only
        the rows whose stamp moved."""
        facts, reading = await self._builder.read(version, rows=False)
        sessions = reading.sessions
        rows = self.members.pass_over(
            self._wanted(reading), lambda item: self._make(*item, reading)
        )
        now = micros(facts.now)
        texts = OpenRow.render_all(rows, now)
        members = tuple((s.owner, s.name, text) for s, text in zip(sessions, texts, strict=True))
        agents = None if facts.agents is None else self._agent_texts(facts.agents)
        return EncodedFleet(facts=_without_agents(facts), members=members, agents=agents)

    def _agent_texts(self, listed: list[dict[str, Any]]) -> tuple[tuple[str | None, str], ...]:
        """Each herdr agent's name and row text. herdr's rows are the very same objects until the
        agent moves (:class:`~fleetd.runtime.live_agents.LiveAgents` makes only a moved agent's
        row again), so when the list lines up with the last read's, only the rows that are not
        the same objects are encoded again — found by a pass at C speed, not one stamp per agent;
        else through the row cache (a row encoded again only when its kind or status moved)."""
        last = self._listed
        if last is not None and len(last[0]) == len(listed):
            moved = list(compress(count(), map(is_not, last[0], listed)))
            if len(moved) <= len(listed) // 8:  # a few agents moved: encode those only
                kept = list(last[1])
                for n in moved:
                    agent = listed[n]
                    kept[n] = (agent["name"], _agent_row(agent).parts[0])
                self.agents.built += len(moved)
                self._listed = (listed, tuple(kept))
                return self._listed[1]
        texts = self.agents.pass_over(
            (((a["name"], a["paneId"]), (a["agent"], a["status"]), a) for a in listed),
            _agent_row,
        )
        agents = tuple((a["name"], t.parts[0]) for a, t in zip(listed, texts, strict=True))
        self._listed = (listed, agents)
        return agents

    def body(self, fleet: EncodedFleet, caller: Caller) -> bytes:
        """``caller``'s answer of ``fleet``: the envelope ``{"ok": true, "result": view}``
        encoded as the tool's document would be."""
        facts = fleet.facts
        view = self._builder.scoped(facts, caller)  # member rows: the orphans only
        operator = caller.role is Role.OPERATOR
        members = [t for owner, _, t in fleet.members if operator or owner == caller.name]
        members.extend(encode(row) for row in view["members"])
        view["members"] = _MEMBERS
        agents: list[str] | None = None
        if fleet.agents is not None:
            if operator:
                agents = [text for _, text in fleet.agents]
            else:
                seen = {name for owner, name, _ in fleet.members if owner == caller.name}
                seen |= {name for owner, name, _ in facts.orphans if owner == caller.name}
                seen |= {lead.agent for lead, *_ in facts.leads}
                agents = [text for name, text in fleet.agents if name in seen]
            view["agents"] = _AGENTS
        text = encode({"ok": True, "result": view})
        text = text.replace(encode(_MEMBERS), f"[{','.join(members)}]", 1)
        if agents is not None:
            text = text.replace(encode(_AGENTS), f"[{','.join(agents)}]", 1)
        return text.encode()

    def _wanted(
        self, reading: FleetReading
    ) -> Iterator[tuple[str, Hashable, tuple[Session, MemberView]]]:
        """Each member's key, stamp, and what its row is made from. The stamp is everything
        :meth:`FleetViewBuilder.member_row` reads but ``now`` (see the module doc); the member
        view stands for its queue's length and its count of pending tickets (it is compared by
        value when it is not the very same object)."""
        bridge, health = self._builder.bridge, self._builder.health
        inputs = bridge.view.row_inputs
        herdr, evidence = reading.statuses.get, health.state.members.get if health else None
        bench, benched = bridge.view.bench, dict[str, datetime | None]()
        for session, view in zip(reading.sessions, reading.views, strict=True):
            sid = session.session_id
            stamp: tuple[object, ...] = (
                session,
                view,
                evidence(sid) if evidence is not None else None,
                *inputs(sid, pending=bool(view.pending_tasks)),
            )
            if session.live:
                profile = session.profile
                if profile not in benched:
                    benched[profile] = bench.benched_until(profile, reading.now)
                stamp += (herdr(session.name), benched[profile])
            yield sid, stamp, (session, view)

    def _make(self, session: Session, view: MemberView, reading: FleetReading) -> OpenRow:
        """One member's row as :meth:`FleetViewBuilder.member_row` makes it, ages left open."""
        builder = self._builder
        sid = session.session_id
        row = builder.member_row(session, reading.now, reading.statuses, reading.backlogs, view)
        slots: list[Slot] = []
        if session.state_since is not None:
            slots.append((row, "stateAgeSeconds", session.state_since))
            if "idleForSeconds" in row:
                slots.append((row, "idleForSeconds", session.state_since))
        delivered_at = builder.bridge.view.delivered_at(sid)
        if delivered_at is not None:
            slots.append((row["openTurn"], "deliveredAgeSeconds", delivered_at))
        health = builder.health
        evidence = health.state.members.get(sid) if health is not None else None
        if evidence is not None:
            slots.append((row["health"], "ageSeconds", evidence.since))
        return open_row(row, slots)


_MEMBERS = marker("members")
_AGENTS = marker("agents")


def _agent_row(agent: dict[str, Any]) -> OpenRow:
    return OpenRow.closed(encode(agent))


def _without_agents(facts: FleetFacts) -> FleetFacts:
    """``facts`` as :meth:`FleetViewBuilder.scoped` cuts them for a body: the agents are spliced
    in as text (``agents`` stays ``None`` in the cut)."""
    return replace(facts, agents=None)
