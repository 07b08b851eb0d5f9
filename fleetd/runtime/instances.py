"""``InstanceWatch``: this fleetd's row in the journal, and INSTANCE_DOWN for the others (issue 24).

Every snapshot interval (the ``instances`` loop, first at start) the watch renews this instance's
row — name, host, version, start, now, the interval it renews at, its leads, its notification
coverage and its published summary — and reads every row back. Each row read is sighted
(:func:`~fleetd.health.instances.sight`): when this instance, on its own clock, last saw it
change. Then:

* **PostgreSQL journal** (shared by several fleetd): the pure rule
  :func:`~fleetd.health.instances.judge_instances` decides which instances stopped renewing for
  two of their own intervals and which INSTANCE_DOWN incidents this instance resolves. An
  incident to open is handed to :class:`~fleetd.runtime.escalation.Escalation` like any other:
  the journal's unique open key keeps the first instance's record and refuses the others', so a
  person is paged once whoever notices first; the human leg's leased outbox sends that page
  once.
* **SQLite journal** (one machine, one instance): no rule runs. If the file lists another
  instance's row, the watch says once that several instances need a PostgreSQL journal.

With a PostgreSQL journal the pass then reads the summaries the other live instances last
published and keeps their leads (name, health, herdr status, foreign incidents assigned) as
:class:`~fleetd.health.snapshot.RemoteLead` values in :class:`RemotePeers`: routing takes
them as peers of last resort (:mod:`fleetd.health.routing`), and a record routed to one goes to
its inbox key on the shared RabbitMQ. Each value carries when its instance was last seen renewing
and at what interval, so the leads of an instance that stops renewing stop being candidates
within two of its intervals even while this instance cannot read the journal.

A journal that fails skips the pass (its outage is reported by the journal's own health), and
the watch judges again from the next read on (``judging_since``): an outage every instance
shared never pages the ones that had no way to renew, and one down before it stays down. The
next pass renews again. Every read has the
journal's deadline, so a slow journal never holds the health loop: routing reads the values the
last pass kept. What it keeps between passes is the last rows read and their sightings (at most
:data:`~fleetd.journal.values.MAX_INSTANCES` each), read without their summaries
(``GET /v1/fleet?scope=all`` reads those when asked, :mod:`fleetd.runtime.fleet_all`), and the
remote leads (at most :data:`~fleetd.runtime.fleet_summary.MAX_SUMMARY_LEADS` each).
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from importlib import metadata
from typing import Any

import msgspec

from fleetd.config import FleetdConfig
from fleetd.config.fields import mask_url
from fleetd.errors import JournalError
from fleetd.health.incidents import Incident
from fleetd.health.instances import (
    InstanceSeen,
    Sighting,
    instance_down_incident,
    instance_key,
    judge_instances,
    sight,
)
from fleetd.health.snapshot import LiveStatus, RemoteLead
from fleetd.health.states import LeadState, Scope
from fleetd.journal.port import Journal
from fleetd.journal.values import MAX_INSTANCE_LEADS, MAX_TEXT, InstanceRecord
from fleetd.runtime.escalation import Escalation, instance_name
from fleetd.runtime.fleet_summary import MAX_SUMMARY_LEADS, SUMMARY_VERSION

__all__ = ["InstanceWatch", "RemotePeers", "fleetd_version", "published_leads"]

_log = logging.getLogger("fleetd.instances")


def fleetd_version() -> str:
    """This build's version, as installed."""
    try:
        return metadata.version("fleetd")
    except metadata.PackageNotFoundError:
        return "unknown"


async def _no_summary() -> Mapping[str, Any] | None:
    return None


def _stay(_other: InstanceRecord) -> None:
    """Outside ``fleetd serve`` nothing stops: the ERROR said it."""


class _LeadHealth(msgspec.Struct, rename="camel"):
    state: str
    assigned_foreign_incidents: int = 0


class _Lead(msgspec.Struct, rename="camel"):
    name: str
    live_status: str | None = None
    health: _LeadHealth | None = None


class _Leads(msgspec.Struct):
    """The one part of a published summary routing reads (every other field is skipped)."""

    version: int
    leads: list[_Lead] = msgspec.field(default_factory=list)


def published_leads(instance: str, seen: Sighting, text: str) -> tuple[RemoteLead, ...]:
    """The leads ``instance`` (sighted as ``seen``) published in ``text`` (its summary, as
    stored) with a health this build knows; none from a summary it cannot read (another
    version, bad JSON).

    A lead no tick there has judged yet (no health: that instance just started, or a standby
    just took it over) is ``LEAD_STATUS_UNKNOWN``: never chosen as a new peer, but an incident
    pinned to it stays — a take-over of its instance is not its failure. So is every lead of an
    instance whose row was read but not yet seen to renew (``seen.renewed`` false: this one
    just started, and that row may be a dead instance's)."""
    try:
        summary = msgspec.json.decode(text, type=_Leads)
    except msgspec.DecodeError:
        return ()
    if summary.version != SUMMARY_VERSION:
        return ()
    leads: list[RemoteLead] = []
    for lead in summary.leads[:MAX_SUMMARY_LEADS]:
        health = lead.health
        try:
            state = (
                LeadState(health.state)
                if health is not None and seen.renewed
                else LeadState.LEAD_STATUS_UNKNOWN
            )
            raw = None if lead.live_status is None else LiveStatus(lead.live_status)
        except ValueError:
            continue
        leads.append(
            RemoteLead(
                instance=instance,
                name=lead.name,
                state=state,
                raw_status=raw,
                assigned=0 if health is None else max(0, health.assigned_foreign_incidents),
                last_seen=seen.since,
                renew_every=seen.every,
            )
        )
    return tuple(leads)


@dataclass(slots=True)
class RemotePeers:
    """The leads the other live instances last published, as the instances loop last kept them:
    read by routing (:meth:`leads`) and by the inbox registry (:meth:`names`, keys a record may
    be published to). At most ``MAX_INSTANCES`` × :data:`MAX_SUMMARY_LEADS` values."""

    kept: tuple[RemoteLead, ...] = ()

    def leads(self) -> tuple[RemoteLead, ...]:
        return self.kept

    def names(self) -> frozenset[str]:
        return frozenset(lead.name for lead in self.kept)


@dataclass(slots=True, kw_only=True)
class InstanceWatch:
    """Renews this instance's row and raises or resolves INSTANCE_DOWN for the others."""

    journal: Journal
    escalation: Escalation
    settings: Callable[[], FleetdConfig]
    run: str  # this run's id: the namespace of the incidents it opens
    started_at: datetime
    host: str = field(default_factory=lambda: socket.gethostname()[:MAX_TEXT] or "unknown")
    version: str = field(default_factory=fleetd_version)
    # what this instance publishes of its fleet with each renewal (the composition root gives
    # the summary of its operator view, fleetd.runtime.fleet_summary)
    summary: Callable[[], Awaitable[Mapping[str, Any] | None]] = _no_summary
    rows: tuple[InstanceRecord, ...] = ()  # as the last pass read them
    # when this instance last saw each row change (its own clock), as of the last read
    sighted: dict[str, Sighting] = field(default_factory=dict)
    # when this instance's reads of the journal last became continuous (its start, the end of
    # an outage): what it could not see is never counted as silence
    judging_since: datetime | None = None
    # the other instances that reconcile their own incidents (not judged down), as of the last
    # read
    minded: frozenset[str] = frozenset()
    # the leads the other live instances published, as the last pass that read them kept them
    peers: RemotePeers = field(default_factory=RemotePeers)
    # called once when another live process is found renewing this instance's row and it was
    # in the row when this one started (``fleetd serve`` stops, exit 3); its row is given
    on_displaced: Callable[[InstanceRecord], None] = _stay
    displaced_by: InstanceRecord | None = None
    _told_sqlite: bool = False
    _failing: bool = False
    _renewed: bool = False  # this process's renewal is in the row (as far as it knows)
    _first_before: str | None = None  # the run the row named at this process's first renewal
    _told_rival: str | None = None
    _read: bool = False  # the rows were read at least once

    @property
    def instance(self) -> str:
        return instance_name(self.settings())

    @property
    def shared(self) -> bool:
        """Whether the journal is PostgreSQL, the one several instances can share."""
        return self.settings().journal.url.get_secret_value().startswith("postgresql")

    def record(self, now: datetime, summary: Mapping[str, Any] | None = None) -> InstanceRecord:
        """This instance's row as of ``now``, publishing ``summary``."""
        config = self.settings()
        return InstanceRecord(
            instance=instance_name(config),
            host=self.host,
            version=self.version[:MAX_TEXT],
            started_at=self.started_at,
            last_seen=now,
            leads=tuple(lead.name for lead in config.leads)[:MAX_INSTANCE_LEADS],
            coverage=self.escalation.coverage().value,
            summary=summary,
            renew_every=config.health.snapshot_interval,
            run=self.run,
        )

    async def step(self, now: datetime) -> None:
        """One pass: renew, read the rows, and (PostgreSQL) judge the others."""
        me = self.instance
        # only a shared journal has readers of the summary: an SQLite one serves one instance
        summary = await self.summary() if self.shared else None
        try:
            before = await self.journal.renew_instance(self.record(now, summary))
            self._rival(before)
            # only names and renewals are judged: the summaries are read when asked for
            self.saw(await self.journal.instances(summaries=False), now)
            if self.shared:
                await self._judge(me, now)
                self.peers.kept = await self._remote(now)
        except JournalError as exc:
            if not self._failing:
                _log.info("instance %r not renewed in the journal (%s); next pass again", me, exc)
            self._failing = True
            self.judging_since = None  # what is not read cannot count as silence
            return
        if self._failing:
            _log.info("instance %r renews its journal row again", me)
            self._failing = False
        others = sorted(r.instance for r in self.rows if r.instance != me)
        if not self.shared and others and not self._told_sqlite:
            self._told_sqlite = True
            url = mask_url(self.settings().journal.url.get_secret_value())
            _log.warning(
                "the SQLite journal %s lists other fleetd instances (%s): several instances "
                "need a PostgreSQL journal (journal.url); an SQLite journal serves one",
                url,
                ", ".join(others[:5]),
            )

    async def read_peers(self, now: datetime) -> None:
        """Read the other live instances' leads now, without renewing (at start, before the
        first tick); a journal that fails leaves them to the first pass."""
        if not self.shared:
            return
        try:
            self.saw(await self.journal.instances(summaries=False), now)
            self.peers.kept = await self._remote(now)
        except JournalError as exc:
            _log.info("the other instances' leads not read at start (%s); next pass again", exc)

    def _rival(self, before: InstanceRecord | None) -> None:
        """Whether another process renewed this instance's row since this one last did: two
        fleetd serve one name (two configs naming one instance, each with its own state store,
        which its lock cannot see). The one that started later — whose first renewal found the
        other's run in the row — stops; the other says so once. No clock is compared. A row
        this process never renewed before (its first renewal: a dead run's row, a standby
        taking over) is no rival's."""
        ours, self._renewed = self._renewed, True
        if not ours:
            self._first_before = None if before is None else before.run
            return
        if before is None or before.run is None or before.run == self.run:
            return
        me = self.instance
        if before.run == self._first_before:  # it was serving when this one started
            if self.displaced_by is None:
                self.displaced_by = before
                _log.error(
                    "fleetd instance %r is also served by run %s on host %r (started %s by its "
                    "clock): two processes must not serve one instance name; it was serving "
                    "when this one started, so this one stops — stop the other or give this "
                    "one another `instance`",
                    me,
                    before.run,
                    before.host,
                    before.started_at.isoformat(),
                )
                self.on_displaced(before)
        elif self._told_rival != before.run:
            self._told_rival = before.run
            _log.warning(
                "fleetd instance %r is also served by run %s on host %r (started %s by its "
                "clock), which started while this one served: that one is to stop; two "
                "processes must not serve one instance name",
                me,
                before.run,
                before.host,
                before.started_at.isoformat(),
            )

    def saw(self, rows: tuple[InstanceRecord, ...], now: datetime) -> None:
        """Keep ``rows`` as read at ``now`` and when each was last seen to change."""
        self.rows = rows
        self.sighted = sight(
            self.sighted,
            (
                InstanceSeen(instance=r.instance, last_seen=r.last_seen, every=r.renew_every)
                for r in rows
            ),
            now=now,
            interval=self.settings().health.snapshot_interval,
        )
        if self.judging_since is None:
            self.judging_since = now
        since = self.judging_since
        me = self.instance
        self._read = True
        self.minded = frozenset(
            name
            for name, seen in self.sighted.items()
            if name != me and not seen.silent(now, judging_since=since)
        )

    def sweeps(self, owner: str | None) -> bool:
        """Whether this instance reconciles the human leg of an incident ``owner`` opened: its
        own, one from before instances were named, and one of an instance judged down or whose
        row is gone. Before the rows were first read, another instance's are left alone: that
        instance may well be live, and its reminders are counted on its own clock."""
        if owner is None or owner == self.instance or not self.shared:
            return True
        return self._read and owner not in self.minded

    def _live(self, now: datetime) -> dict[str, Sighting]:
        """The other instances not silent for two of their intervals at ``now`` (a row read
        once included: its leads keep what is pinned to them, but are no new peers until it
        is seen to renew, :func:`published_leads`)."""
        me = self.instance
        return {n: s for n, s in self.sighted.items() if n != me and not s.down(now)}

    async def _remote(self, now: datetime) -> tuple[RemoteLead, ...]:
        """The leads of the other instances live at ``now``, from their last summaries."""
        live = self._live(now)
        if not live:
            return ()
        texts = await self.journal.instance_summaries(sorted(live))
        return tuple(
            lead
            for name, text in sorted(texts.items())
            if name in live
            for lead in published_leads(name, live[name], text)
        )

    async def _judge(self, me: str, now: datetime) -> None:
        snapshot = await self.journal.load_open()
        stored: dict[str, Incident] = {}
        openers: dict[str, str | None] = {}
        for kept in snapshot.open_incidents:
            if kept.incident.scope is Scope.INSTANCE:
                stored[kept.incident.subject] = kept.incident
                openers[kept.incident.subject] = kept.instance
        verdict = judge_instances(
            self.sighted,
            me=me,
            open_down=openers,
            now=now,
            judging_since=self.judging_since or now,
        )
        for name in verdict.down:
            key = instance_key(name)
            generation = max(snapshot.generations.get(key, 0), snapshot.generation_floor) + 1
            _log.warning("fleetd instance %r stopped renewing its row: INSTANCE_DOWN", name)
            self.escalation.note(
                instance_down_incident(name, generation=generation, now=now, namespace=self.run)
            )
        for name, reason in verdict.resolve:
            _log.info("fleetd instance %r: INSTANCE_DOWN resolved (%s)", name, reason.value)
            self.escalation.note_resolved(stored[name], reason=reason, resolved_at=now)
