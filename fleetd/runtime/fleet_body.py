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

Making every member's stamp was itself most of a version at a thousand members, so a version
makes the stamps of only the members that may have moved since the last one: those the roster
marked (its own reader of the marks, :meth:`BridgeView.marks
<fleetd.bridge.view.BridgeView.marks>`, taken before the version is read, so a member that moves
while it is read stays marked: its mark moves the view to the next version, which shows it), and
those whose waiting replies, herdr status or health evidence moved, found by comparing them with
the last version's. Reads run one at a time, since each keeps what the next compares with.
Every stamp is made again when that cannot be told: other members or another order, another
configuration, a bench that moved.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from itertools import compress, count
from operator import attrgetter, is_not
from typing import Any, Protocol

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
        self._marks: _Marks | None = None  # its own reader of the roster's marks (first read)
        #: one read at a time: a read keeps what the next one compares with, so two that
        #: overlapped and ended out of order would keep the older one's rows
        self._reading = asyncio.Lock()
        self._last: _LastRows | None = None
        #: also make every member's stamp and check that no kept row is stale (the test harness)
        self.check = False
        # the agent rows last read and their texts: herdr's rows are the same objects until
        # what herdr shows of that agent changes (LiveAgents keeps them across lists)
        self._listed: tuple[list[dict[str, Any]], tuple[tuple[str | None, str], ...]] | None = None

    async def read(self, version: int) -> EncodedFleet:
        """The facts of ``version`` with every member and agent row as text, encoding again only
        the rows whose stamp moved. Reads of two versions run one after the other."""
        async with self._reading:
            return await self._read(version)

    async def _read(self, version: int) -> EncodedFleet:
        if self._marks is None:
            self._marks = self._builder.bridge.view.marks()
        # taken before the reading is made: a member that moves while it is made stays marked
        marked = self._marks.take()
        try:
            facts, reading = await self._builder.read(version, rows=False)
        except BaseException:
            self._last = None  # its marks are gone: the next read makes every stamp
            raise
        sessions = reading.sessions
        rows = self._member_rows(reading, marked)
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

    def _member_rows(self, reading: FleetReading, marked: set[str]) -> list[OpenRow]:
        """Each member's row, in order. Only the members that may have moved since the last read
        (:meth:`_moved`; ``marked``: the roster's marks since then) have their stamp made and
        looked at; every other keeps its row. When that cannot be told, every member's stamp is
        made (the rows whose stamp did not move are still kept)."""

        def make(item: tuple[Session, MemberView]) -> OpenRow:
            return self._make(*item, reading)

        sessions, views = reading.sessions, reading.views
        ids = list(map(_SESSION_ID, sessions))
        inputs = self._inputs(reading.now)
        evidence = self._evidence()
        last, self._last = self._last, None  # a read that raises leaves nothing half-kept
        moved = self._moved(reading, marked, last, ids=ids, inputs=inputs, evidence=evidence)
        if moved is None or last is None:
            rows = self.members.pass_over(self._wanted(reading, sessions, views), make)
        else:
            rows = list(last.rows)
            at = sorted(p for p in map(last.position.get, moved) if p is not None)
            picked = self._wanted(reading, [sessions[p] for p in at], [views[p] for p in at])
            for p, row in zip(at, self.members.refresh(picked, make), strict=True):
                rows[p] = row
        if self.check and self._marks is not None:
            # a member marked again since the marks were taken is read again next time
            again = self._marks.marked()
            stale = self.members.stale(self._wanted(reading, sessions, views))
            if any(sid not in again for sid in stale):
                raise AssertionError(f"member rows kept from an older stamp: {stale}")
        position = last.position if last is not None and last.ids == ids else None
        self._last = _LastRows(
            ids=ids,
            position=position or {sid: n for n, sid in enumerate(ids)},
            rows=rows,
            backlogs=reading.backlogs,
            statuses=reading.statuses,
            evidence=evidence,
            inputs=inputs,
        )
        return rows

    def _moved(
        self,
        reading: FleetReading,
        marked: set[str],
        last: _LastRows | None,
        *,
        ids: list[str],
        inputs: tuple[object, ...],
        evidence: Mapping[str, object] | None,
    ) -> set[str] | None:
        """The members whose row may have moved since ``last`` (``None``: every member may
        have): those the roster marked (a new session value, its open turn, queue, tickets or
        last polled status), those whose waiting replies, herdr status or health evidence moved.
        The same members in the same order, the same configuration and the same benched
        profiles are needed, or else ``None``."""
        if last is None or ids != last.ids or inputs != last.inputs:
            return None
        moved = marked
        if reading.backlogs != last.backlogs:
            moved |= _keys_moved(reading.backlogs, last.backlogs)
        if reading.statuses != last.statuses:  # herdr listed again: by agent name
            names = _keys_moved(reading.statuses, last.statuses)
            moved.update(s.session_id for s in reading.sessions if s.name in names)
        if evidence is not last.evidence:  # a health tick: its unchanged evidence is kept as is
            before, now = last.evidence or _NONE, evidence or _NONE
            moved.update(sid for sid in ids if now.get(sid) is not before.get(sid))
        return moved

    def _inputs(self, now: datetime) -> tuple[object, ...]:
        """What every row may read beside its own member: the configuration and the benched
        profiles (with when each bench ends)."""
        bench = self._builder.bridge.view.bench
        return (self._builder.config.current, tuple(sorted(bench.benched(now))))

    def _evidence(self) -> Mapping[str, object] | None:
        """Health's evidence of every member as of its last tick (``None`` without health)."""
        health = self._builder.health
        return health.state.members if health is not None else None

    def _wanted(
        self, reading: FleetReading, sessions: list[Session], views: list[MemberView]
    ) -> Iterator[tuple[str, Hashable, tuple[Session, MemberView]]]:
        """Each member's key, stamp, and what its row is made from. The stamp is everything
        :meth:`FleetViewBuilder.member_row` reads but ``now`` (see the module doc); the member
        view stands for its queue's length and its count of pending tickets (it is compared by
        value when it is not the very same object)."""
        bridge, health = self._builder.bridge, self._builder.health
        inputs = bridge.view.row_inputs
        herdr, evidence = reading.statuses.get, health.state.members.get if health else None
        bench, benched = bridge.view.bench, dict[str, datetime | None]()
        for session, view in zip(sessions, views, strict=True):
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


@dataclass(frozen=True, slots=True, kw_only=True)
class _LastRows:
    """The member rows of the last read, and what :meth:`FleetBodies._moved` compares with."""

    ids: list[str]
    position: dict[str, int]
    rows: list[OpenRow]
    backlogs: Mapping[str, object]
    statuses: Mapping[str, str]
    evidence: Mapping[str, object] | None
    inputs: tuple[object, ...]


class _Marks(Protocol):
    """A reader of the roster's touches (:meth:`BridgeView.marks`)."""

    def take(self) -> set[str]: ...

    def marked(self) -> frozenset[str]: ...


_SESSION_ID = attrgetter("session_id")
_NONE: Mapping[str, object] = {}


def _keys_moved(now: Mapping[str, object], before: Mapping[str, object]) -> set[str]:
    """The keys whose value differs between two mappings (absent counts as a value)."""
    return {key for key in now.keys() | before.keys() if now.get(key) != before.get(key)}


_MEMBERS = marker("members")
_AGENTS = marker("agents")


def _agent_row(agent: dict[str, Any]) -> OpenRow:
    return OpenRow.closed(encode(agent))


def _without_agents(facts: FleetFacts) -> FleetFacts:
    """``facts`` as :meth:`FleetViewBuilder.scoped` cuts them for a body: the agents are spliced
    in as text (``agents`` stays ``None`` in the cut)."""
    return replace(facts, agents=None)
