"""The fleet view, built once per change: versions, one build per version, long-poll waits.

Theory of operation
-------------------
``fleet_list`` used to be built for every request: a herdr ``agent.list``, an inbox statistics
read per lead, every member's row, every time. :class:`FleetViews` builds it once per *version*
and hands every caller of that version the same facts (and the HTTP transport the same bytes).

**What a change is.** The version moves when
:meth:`~fleetd.runtime.fleet_view.FleetViewBuilder.change_key` moves: the bridge's revision
(``bridge.reads.revision``, the count of its roster's touches: a send accepted, a prompt delivered,
a ticket ended, a session spawned, ready, busy, done, released), each health tick, each herdr
``agent.list`` and each herdr status that changed
(:class:`~fleetd.runtime.live_agents.LiveAgents`), the control link's state, the push loop's
outcomes, what waits in memory for the inbox, the inbox's reachability and decode failures, the
orphans, the config status, and each dependency's events (a failure, a breaker turning, another
broker or receiver in use, a catalog probe) — not each answered call, whose counts and latency are
shown as of the version (a call that changed nothing, a refusal above all, moves no version). The
key is a tuple of counters, cheap enough to read on every request, so a change is seen by the next
request whatever made it. The herdr agents are listed at least every ten seconds (the
``herdr-agents`` loop), so even a quiet fleet gets a fresh view — and fresh ages — that often;
nothing else moves the version, so neither a long-poll nor an ``ETag`` is woken or broken by time
alone.

**A view is the state after an operation, not half-way through it.** Each loop step and each
fleet tool call that can change anything is *settled* (:meth:`FleetViews.settling`,
:meth:`FleetViews.touched`): if the key moved while it ran, the version moves once more when it
ends, so a view built while it awaited (a pane read after a delivery, a reply stored after its
ticket ended) is never the last word.

**One build per version.** Concurrent requests for a version being built wait for that build; a
build is cut per scope (the operator, each lead) once per version. The ``fleet_list`` tool and
``GET /v1/fleet`` share it: the tool's document is the scope's encoded answer read back (its
member rows kept between versions, :mod:`fleetd.runtime.fleet_body`), so the two cannot differ
and the tool does not build every member's row again for each version. Waiters on a version
(:meth:`FleetViews.wait_past`, the long-poll of ``GET /v1/fleet``) are released when the version
moves past theirs, when their time is up, or when fleetd is asked to stop.

**A long-poll cannot make fleetd rebuild without pause.** A busy fleet changes many times a
second (a thousand members each replying). A waiter holding the version last built is answered
no sooner than :data:`LONG_POLL_SPACING_SECONDS` after that build, or four times the build's own
duration if that is longer: however many dashboards wait, builds for them take at most about a
fifth of the process. A request without ``wait`` always gets the current version.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from fleetd.clock import Clock, wait_event
from fleetd.identity import Caller, Role
from fleetd.runtime.fleet_body import EncodedFleet, FleetBodies
from fleetd.runtime.fleet_view import FleetViewBuilder

__all__ = ["LONG_POLL_SPACING_SECONDS", "EncodedView", "FleetViews", "VersionedView", "scope_of"]

LONG_POLL_SPACING_SECONDS = 0.25
"""A long-poll holding the last built version is answered no sooner than this after its build."""


_Built = TypeVar("_Built")


def scope_of(caller: Caller) -> str:
    """The part of the fleet a caller sees: ``operator``, or ``lead.<name>``."""
    return "operator" if caller.role is Role.OPERATOR else f"lead.{caller.name}"


@dataclass(frozen=True, slots=True, kw_only=True)
class VersionedView:
    """One scope's view of one version (never changed once handed out)."""

    version: int
    scope: str
    view: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class EncodedView:
    """One scope's answer of one version as ``GET /v1/fleet`` sends it (never changed once
    handed out): the envelope ``{"ok": true, "result": view}`` encoded."""

    version: int
    scope: str
    body: bytes


class FleetViews:
    """The versions of the fleet view and the one build of each."""

    def __init__(self, builder: FleetViewBuilder, *, clock: Clock, stopping: asyncio.Event):
        self._builder = builder
        self._clock = clock
        self._stopping = stopping
        self._version = 0
        self._key: tuple[object, ...] | None = None
        self._moved = asyncio.Event()
        self._scoped: dict[str, VersionedView] = {}
        self.bodies = FleetBodies(builder)
        self._encoded: EncodedFleet | None = None
        self._encoding: tuple[int, asyncio.Task[EncodedFleet]] | None = None
        self._bodies: dict[str, EncodedView] = {}
        self._last_build = (-1, 0.0, 0.0)  # version, finished (monotonic), seconds it took
        self.builds = 0  # facts built since start (what a benchmark or a test counts)

    # ------------------------------------------------------------------ versions
    def version(self) -> int:
        """The current version, moved first if anything the view shows changed."""
        key = self._builder.change_key()
        if key != self._key:
            self._key = key
            self._advance()
        return self._version

    def change_key(self) -> tuple[object, ...]:
        """What the version follows, now (see the module docstring)."""
        return self._builder.change_key()

    def touched(self, since: tuple[object, ...] | None = None) -> None:
        """An operation that may have changed the fleet ended: its outcome is a new version —
        when the key moved since ``since`` (the key when it began; ``None``: not known, taken as
        moved). An operation that changed nothing moves no version of its own."""
        if since is None or self._builder.change_key() != since:
            self._key = None
        self.version()

    def settling(self, step: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[None]]:
        """``step`` (a loop step) whose end gets a version of its own when it changed anything."""

        async def settled() -> None:
            before = self._builder.change_key()
            try:
                await step()
            finally:
                if self._builder.change_key() != before:
                    self.touched()

        return settled

    def _advance(self) -> None:
        self._version += 1
        self._scoped = {}
        self._encoded = None
        self._bodies = {}
        moved, self._moved = self._moved, asyncio.Event()
        moved.set()

    async def wait_past(self, version: int, seconds: float) -> int:
        """Wait while the version is ``version``: at most ``seconds``, and not once fleetd is
        asked to stop. Returns the version then current (any other value returns at once, so a
        version of an earlier run of fleetd is not waited on). A caller holding the version last
        built is let go no sooner than its spacing allows (see the module docstring)."""
        clock = self._clock
        deadline = clock.monotonic() + seconds
        while not self._stopping.is_set():
            remaining = deadline - clock.monotonic()
            if self.version() == version:
                if remaining <= 0:
                    break
                await wait_event(clock, self._moved, remaining, unless=self._stopping)
                continue
            built, finished, took = self._last_build
            hold = finished + max(LONG_POLL_SPACING_SECONDS, 4 * took) - clock.monotonic()
            if built != version or hold <= 0 or remaining <= 0:
                break
            await wait_event(clock, self._stopping, min(hold, remaining))
        return self.version()

    # ------------------------------------------------------------------ views
    async def view(self, caller: Caller) -> dict[str, Any]:
        """``caller``'s view of the current version (the ``fleet_list`` tool)."""
        return (await self.versioned(caller)).view

    async def versioned(self, caller: Caller) -> VersionedView:
        """``caller``'s view of the current version, with the version it is: its encoded answer
        (:meth:`encoded`) read back, so the tool's document is byte for byte what ``GET
        /v1/fleet`` sends."""
        scope = scope_of(caller)
        version = self.version()
        cached = self._scoped.get(scope)
        if cached is not None and cached.version == version:
            return cached
        encoded = await self.encoded(caller)
        view: dict[str, Any] = json.loads(encoded.body)["result"]
        made = VersionedView(version=encoded.version, scope=scope, view=view)
        if encoded.version == self._version:
            self._scoped[scope] = made
        return made

    async def encoded(self, caller: Caller) -> EncodedView:
        """``caller``'s answer of the current version as ``GET /v1/fleet`` sends it: assembled
        once per scope and version from rows kept between versions (:mod:`fleetd.runtime.
        fleet_body`); the same document as :meth:`versioned`'s view, encoded."""
        scope = scope_of(caller)
        version = self.version()
        cached = self._bodies.get(scope)
        if cached is not None and cached.version == version:
            return cached
        fleet = await self._encoded_of(version)
        built = fleet.facts.version
        cached = self._bodies.get(scope)  # the callers that waited for this build with this one
        if cached is not None and cached.version == built:
            return cached
        made = EncodedView(version=built, scope=scope, body=self.bodies.body(fleet, caller))
        if cached is None or cached.version < built:  # kept for them even if a newer one moved on
            self._bodies[scope] = made
        return made

    async def _encoded_of(self, version: int) -> EncodedFleet:
        """The encoded rows of ``version``: read once, however many callers ask at once."""
        if self._encoded is not None and self._encoded.facts.version == version:
            return self._encoded
        if self._encoding is None or self._encoding[0] != version or self._encoding[1].done():
            made = self._timed(version, self.bodies.read(version))
            self._encoding = (version, asyncio.ensure_future(made))
        fleet = await asyncio.shield(self._encoding[1])
        if fleet.facts.version == self._version:
            self._encoded = fleet
        return fleet

    async def _timed(self, version: int, build: Awaitable[_Built]) -> _Built:
        """One build of ``version``, counted and timed (the long-poll spacing reads its time)."""
        self.builds += 1
        started = self._clock.monotonic()
        built = await build
        finished = self._clock.monotonic()
        self._last_build = (version, finished, finished - started)
        return built
