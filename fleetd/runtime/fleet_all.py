"""``GET /v1/fleet?scope=all``: this instance's view and every other instance's last summary.

Several fleetd share one PostgreSQL journal (issue 24); each renews its ``instances`` row every
snapshot interval with its :class:`~fleetd.runtime.fleet_summary.InstanceSummary`. The operator
asking any one of them for ``scope=all`` gets one part per instance, the answering one first,
then the others by name:

* the answering instance: its own operator view (``view``, the ``fleet_list`` document of the
  current version, the very bytes ``GET /v1/fleet`` sends), never ``down``;
* every other instance: its last published ``summary`` as read from the journal now, with
  ``ageSeconds`` (seconds since this instance saw it renew, on this instance's clock) and
  ``down`` when it has been silent for more than two of its own intervals
  (:class:`~fleetd.health.instances.Sighting`, the INSTANCE_DOWN rule). A row this instance
  has not yet seen change (it just started) is shown by the renewal time written in it until
  it does: a host silent for ten minutes is down at once on a page opened after a restart.
  A down instance keeps its last summary, stamped with its age: it is shown, never left out. A
  summary this build cannot read (another version, none published yet) is ``null`` and
  ``summaryProblem`` says why.

Each part names its instance, host, fleetd version, start and last renewal (as its own clock
wrote them). The journal read has
the journal's deadline (``journal.operationTimeoutMs``); a read that fails answers this
instance alone with ``journal.read: failed`` and the reason, so the others are not silently
missing. An SQLite journal serves one fleetd: ``scope=all`` answers this instance alone and
``note`` says so (no journal read).

:func:`fleet_all` is pure (rows, their sightings, ``now`` and the interval in, the document
out). The document and each part are built from their models (:class:`FleetAllResult`,
:class:`FleetInstancePart`, :class:`FleetJournalRead`, which ``GET /v1/fleet?scope=all``'s
contract is made from); what they nest — the answering instance's view and the others'
summaries — is put in as it stands, and :class:`FleetAcross` reads the rows and splices the
answering instance's view into it as text.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Annotated, Any, Final, Literal

import msgspec
from pydantic import Field

from fleetd.bridge.answers import Absent, WireModel, wire
from fleetd.clock import Clock
from fleetd.errors import JournalError
from fleetd.health.instances import Sighting, instance_is_down
from fleetd.identity import Caller
from fleetd.journal.port import Journal
from fleetd.journal.values import InstanceRecord
from fleetd.runtime.fleet_models import FleetListResult
from fleetd.runtime.fleet_rows import encode, marker
from fleetd.runtime.fleet_summary import SUMMARY_VERSION, InstanceSummary
from fleetd.runtime.fleet_versions import FleetViews
from fleetd.runtime.instances import InstanceWatch

__all__ = [
    "FLEET_ALL_VERSION",
    "SINGLE_INSTANCE_NOTE",
    "Answering",
    "FleetAcross",
    "FleetAllResult",
    "FleetInstancePart",
    "FleetJournalRead",
    "fleet_all",
    "shown_summary",
]

_log = logging.getLogger("fleetd.instances")

FLEET_ALL_VERSION: Final = 1
SINGLE_INSTANCE_NOTE: Final = (
    "an SQLite journal serves one fleetd: scope=all shows this instance only "
    "(several instances share a PostgreSQL journal)"
)
_VIEW = marker("view")
_ENVELOPE_HEAD = b'{"ok":true,"result":'


@dataclass(frozen=True, slots=True, kw_only=True)
class Answering:
    """The instance that answers: its name, host, version and start."""

    instance: str
    host: str
    version: str
    started_at: datetime


class FleetInstancePart(WireModel):
    """One fleetd sharing the journal in ``GET /v1/fleet?scope=all``: the answering one with
    its own ``view``, every other one with its last published ``summary``. ``lastSeen`` is its
    last renewal as its own clock wrote it; ``ageSeconds`` the time since the answering instance
    saw it renew, on the answering one's clock (null: the answering one's row was not read);
    ``down``: silent for more than two of its own intervals (INSTANCE_DOWN's rule), shown with
    its last summary."""

    instance: str
    answering: bool
    host: str
    fleetd_version: str
    started_at: str
    last_seen: str | None
    age_seconds: float | None
    down: bool
    view: FleetListResult | Absent = None  # the answering instance only
    summary: InstanceSummary | None = Field(
        default=None, description="the other instances' last published summary (null: unreadable)"
    )
    summary_problem: str | Absent = Field(
        default=None, description="why summary is null: not_published, unknown_version: N"
    )


class FleetJournalRead(WireModel):
    """Whether the journal is shared (PostgreSQL) and whether its instance rows were read."""

    shared: bool
    read: Literal["ok", "failed", "not_shared"]
    reason: str | Absent = None


class FleetAllResult(WireModel):
    """``GET /v1/fleet?scope=all`` v1: every fleetd sharing the journal, the answering one first
    (see :mod:`fleetd.runtime.fleet_all`)."""

    version: Literal[1]
    scope: Literal["all"]
    instance: str
    generated_at: str
    interval_seconds: float
    journal: FleetJournalRead
    instances: list[FleetInstancePart]
    live: Annotated[int, Field(ge=1)]
    down: Annotated[int, Field(ge=0)]
    note: str | Absent = None


def _age(last_seen: datetime, now: datetime) -> float:
    return round(max(0.0, (now - last_seen).total_seconds()), 3)


def shown_summary(record: InstanceRecord) -> tuple[Mapping[str, Any] | None, str | None]:
    """The summary of ``record`` as published, or why it cannot be shown."""
    summary = record.summary
    if summary is None:
        return None, "not_published"
    if summary.get("version") != SUMMARY_VERSION:
        return None, f"unknown_version: {str(summary.get('version'))[:20]}"
    return summary, None


def fleet_all(
    rows: Sequence[InstanceRecord],
    *,
    me: Answering,
    now: datetime,
    interval: timedelta,
    shared: bool,
    sighted: Mapping[str, Sighting] | None = None,
    judging_since: datetime | None = None,
    read_failure: str | None = None,
    summaries: Mapping[str, tuple[Any, str | None]] | None = None,
) -> dict[str, Any]:
    """The ``scope=all`` document of ``me`` at ``now`` from the instance ``rows`` read and when
    this instance saw each renew (``sighted``; a row not in it, or renewed since, is seen
    renewing now), judged from ``judging_since`` (when this instance's reads last became
    continuous); the
    answering part's ``view`` is :data:`_VIEW`, the marker :class:`FleetAcross` replaces with
    the view's text. Each other part's summary and its problem are :func:`shown_summary` of its
    row, or what ``summaries`` holds for it (:class:`FleetAcross` passes markers of texts it
    keeps)."""
    own = next((r for r in rows if r.instance == me.instance), None)
    answering = _part(
        me.instance,
        me.host,
        me.version,
        me.started_at,
        last_seen=own.last_seen if own is not None else None,
        age=_age(own.last_seen, now) if own is not None else None,
        answering=True,
        down=False,  # it is answering
    )
    answering["view"] = _VIEW
    parts = [answering]
    down = 0
    for record in sorted((r for r in rows if r.instance != me.instance), key=_name):
        if summaries is not None and record.instance in summaries:
            summary, problem = summaries[record.instance]
        else:
            summary, problem = shown_summary(record)
        seen = (sighted or {}).get(record.instance)
        if seen is None or seen.last_seen != record.last_seen:
            seen = Sighting(
                last_seen=record.last_seen, since=now, every=interval, renewed=seen is not None
            )
        if seen.renewed:
            # down as INSTANCE_DOWN judges it: what this instance could not see is not silence
            since = seen.since
            is_down = seen.silent(now, judging_since=judging_since or since)
        else:
            # not yet seen to renew (this instance just started): shown by the renewal time
            # its own clock wrote, until it is seen to change (paging never reads that time)
            since = min(seen.since, record.last_seen)
            is_down = instance_is_down(record.last_seen, now=now, interval=seen.every)
        down += is_down
        part = _part(
            record.instance,
            record.host,
            record.version,
            record.started_at,
            last_seen=record.last_seen,
            age=_age(since, now),
            answering=False,
            down=is_down,
        )
        part["summary"] = summary  # as published (or a marker of its kept text)
        if problem is not None:
            part["summaryProblem"] = problem
        parts.append(part)
    if read_failure is not None:
        journal = FleetJournalRead.of(shared=shared, read="failed", reason=read_failure)
    else:
        journal = FleetJournalRead.of(shared=shared, read="ok" if shared else "not_shared")
    note: dict[str, str] = {}
    if not shared:
        note["note"] = SINGLE_INSTANCE_NOTE
    elif read_failure is not None:
        note["note"] = "the journal could not be read: the other instances are unknown, not absent"
    document = wire(
        FleetAllResult.of(
            version=FLEET_ALL_VERSION,
            scope="all",
            instance=me.instance,
            generated_at=now.isoformat(),
            interval_seconds=interval.total_seconds(),
            journal=journal,
            instances=[],  # the parts, with the texts they splice, are put in below
            live=len(parts) - down,
            down=down,
            **note,
        )
    )
    document["instances"] = parts
    return document


def _part(
    instance: str,
    host: str,
    version: str,
    started_at: datetime,
    *,
    last_seen: datetime | None,
    age: float | None,
    answering: bool,
    down: bool,
) -> dict[str, Any]:
    """One instance's part without what it nests (its ``view`` or ``summary``), as written."""
    return wire(
        FleetInstancePart.of(
            instance=instance,
            answering=answering,
            host=host,
            fleetd_version=version,
            started_at=started_at.isoformat(),
            last_seen=last_seen.isoformat() if last_seen is not None else None,
            age_seconds=age,
            down=down,
        )
    )


def _name(record: InstanceRecord) -> str:
    return record.instance


@dataclass(frozen=True, slots=True)
class _Kept:
    """Another instance's summary as last read: the renewal it came with, its text (or why it
    is not shown)."""

    last_seen: datetime
    text: str | None
    problem: str | None


@dataclass(slots=True, kw_only=True)
class FleetAcross:
    """Answers ``scope=all``: the journal's instance rows read now (with its deadline), this
    instance's encoded view spliced in.

    Each answer reads the rows' renewals (no summaries); the summaries of the rows renewed since
    they were last read are read again, as the JSON texts stored (never decoded but for their
    ``version``, never encoded again), and each is kept until its row's next renewal. What is
    kept is one text per row of the last read (at most
    :data:`~fleetd.journal.values.MAX_INSTANCES`)."""

    views: FleetViews
    watch: InstanceWatch
    journal: Journal
    clock: Clock
    interval: Callable[[], timedelta]
    kept: dict[str, _Kept] = field(default_factory=dict)
    summary_reads: int = 0  # reads of the summaries (a test or a benchmark counts them)
    _failing: bool = False  # the last read failed (said once, not once per answer)

    async def _rows(self, me: str) -> Sequence[InstanceRecord]:
        """The rows, each other instance's summary kept as of its last renewal."""
        rows = await self.journal.instances(summaries=False)
        self.watch.saw(rows, self.clock.now())
        kept = self.kept
        renewed = [r for r in rows if r.instance != me and _renewed(kept.get(r.instance), r)]
        if renewed:
            texts = await self.journal.instance_summaries([r.instance for r in renewed])
            self.summary_reads += 1
            for row in renewed:
                kept[row.instance] = _kept(row.last_seen, texts.get(row.instance))
        names = {r.instance for r in rows}
        for gone in [name for name in kept if name not in names]:
            del kept[gone]
        return rows

    async def encoded(self, caller: Caller) -> bytes:
        """The envelope ``{"ok": true, "result": document}`` of ``caller`` (an operator),
        encoded as ``GET /v1/fleet`` sends it."""
        own = await self.views.encoded(caller)
        watch = self.watch
        me = watch.instance
        rows: Sequence[InstanceRecord] = ()
        failure: str | None = None
        shared = watch.shared
        if shared:
            try:
                rows = await self._rows(me)
            except JournalError as exc:
                failure = f"journal unavailable ({exc.reason})"
                if not self._failing:
                    _log.info(
                        "scope=all: the instance rows cannot be read (%s); answering with this "
                        "instance alone until they can",
                        exc.reason,
                    )
                self._failing = True
            else:
                if self._failing:
                    _log.info("scope=all: the instance rows are read again")
                self._failing = False
        texts: list[bytes] = [own.body[len(_ENVELOPE_HEAD) : -1]]  # {"ok":true,"result":view}
        summaries: dict[str, tuple[Any, str | None]] = {}
        for row in sorted((r for r in rows if r.instance != me), key=_name):
            kept = self.kept[row.instance]
            if kept.text is None:
                summaries[row.instance] = (None, kept.problem)
                continue
            summaries[row.instance] = (marker(f"summary.{len(texts)}"), None)
            texts.append(kept.text.encode())
        document = fleet_all(
            rows,
            me=Answering(
                instance=me, host=watch.host, version=watch.version, started_at=watch.started_at
            ),
            now=self.clock.now(),
            interval=self.interval(),
            shared=shared,
            sighted=self.watch.sighted,
            judging_since=self.watch.judging_since,
            read_failure=failure,
            summaries=summaries,
        )
        rest = encode({"ok": True, "result": document}).encode()
        out: list[bytes] = []
        markers = [_VIEW] + [marker(f"summary.{n}") for n in range(1, len(texts))]
        for placeholder, text in zip(markers, texts, strict=True):  # in the document's order
            head, _, rest = rest.partition(encode(placeholder).encode())
            out += (head, text)
        out.append(rest)
        return b"".join(out)


class _Version(msgspec.Struct):
    """The one field of a summary read to know whether this build can show it."""

    version: object = None


def _kept(last_seen: datetime, text: str | None) -> _Kept:
    """A summary's text as stored, kept if it is a summary of the version this build shows."""
    if text is None:
        return _Kept(last_seen=last_seen, text=None, problem="not_published")
    try:
        version = msgspec.json.decode(text, type=_Version).version
    except msgspec.MsgspecError:  # not a JSON object: nothing a fleetd published
        return _Kept(last_seen=last_seen, text=None, problem="unreadable")
    if version != SUMMARY_VERSION:
        return _Kept(last_seen=last_seen, text=None, problem=f"unknown_version: {version!s:.20}")
    return _Kept(last_seen=last_seen, text=text, problem=None)


def _renewed(kept: _Kept | None, row: InstanceRecord) -> bool:
    """Whether ``row`` was renewed since its summary was kept (or none is)."""
    return kept is None or kept.last_seen != row.last_seen
