"""The control link to herdr, as fleetd experiences it.

:class:`LinkObserver` runs around the one chokepoint of the
:class:`~fleetd.herdr.control.AgentControl` port that every herdr call of the service goes
through (:meth:`~fleetd.herdr.control.AgentControl.observe`), counts each call in
``fleetd_herdr_requests_total`` and records its outcome in a :class:`LinkState`: a call that
answered (even with an error frame such as ``agent_not_found``) proves the link works; a
:class:`~fleetd.errors.ControlLinkError` counts as a link failure.

One failed call is not a dead link. The health monitor classifies the link (CONTROL_LINK_DOWN needs
two failed fleet lists plus a failed ping, M4 §4.3), and :meth:`LinkState.view` — what
``fleet_list.controlLink`` and the ``/healthz`` component show — reports that classification as
``state`` and the last call's own outcome as ``lastCall``. While health is off (or has not ticked
yet) the calls themselves decide, with the same patience: ``state`` turns ``down`` only once at
least two consecutive calls failed over the classification window (two snapshot intervals), and
``classifiedBy`` says ``calls``. Until then it keeps the last known state.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TypeVar

from fleetd.clock import Clock
from fleetd.errors import ControlLinkError, HerdrError
from fleetd.health.states import ControlLinkState
from fleetd.herdr.model import AgentInfo, Pong
from fleetd.metrics import Metrics
from fleetd.runtime.fleet_models import ControlLink
from fleetd.runtime.live_agents import LiveAgents

__all__ = ["LinkObserver", "LinkState", "LinkStatus"]

T = TypeVar("T")


class LinkStatus(StrEnum):
    UNKNOWN = "unknown"
    UP = "up"
    DOWN = "down"


@dataclass(slots=True)
class LinkState:
    """The last outcomes of calls to herdr."""

    status: LinkStatus = LinkStatus.UNKNOWN
    last_ok_at: datetime | None = None
    last_failure_at: datetime | None = None
    last_failure_code: str | None = None
    consecutive_failures: int = 0
    failing_since: datetime | None = None  # the first failure of the current streak
    herdr_version: str | None = None
    herdr_protocol: int | None = None

    def view(
        self,
        classified: ControlLinkState | None = None,
        *,
        now: datetime | None = None,
        window: timedelta = timedelta(0),
    ) -> ControlLink:
        """The link for ``fleet_list`` and ``/healthz``; ``classified`` is health's verdict, else
        the calls decide once a failure streak has lasted ``window`` (at ``now``). Built as its
        model unvalidated (:meth:`~fleetd.bridge.answers.WireModel.of`): each view reads it."""
        if classified is None:
            state, source = self._from_calls(now, window), "calls"
        elif classified is ControlLinkState.CONTROL_LINK_DOWN:
            state, source = LinkStatus.DOWN, "health"
        else:
            state, source = LinkStatus.UP, "health"
        return ControlLink.of(
            state=state.value,
            classified_by=source,
            last_call=_LAST_CALL[self.status],
            last_ok_at=self.last_ok_at.isoformat() if self.last_ok_at else None,
            last_failure_at=self.last_failure_at.isoformat() if self.last_failure_at else None,
            last_failure_code=self.last_failure_code,
            consecutive_failures=self.consecutive_failures,
            herdr_version=self.herdr_version,
            herdr_protocol=self.herdr_protocol,
        )

    def _from_calls(self, now: datetime | None, window: timedelta) -> LinkStatus:
        if self.status is not LinkStatus.DOWN:
            return self.status
        lasted = (
            now is not None
            and self.failing_since is not None
            and now - self.failing_since >= window
        )
        if self.consecutive_failures >= _FAILED_CALLS_FOR_DOWN and (lasted or not window):
            return LinkStatus.DOWN
        return LinkStatus.UP if self.last_ok_at is not None else LinkStatus.UNKNOWN


_FAILED_CALLS_FOR_DOWN = 2
_LAST_CALL = {LinkStatus.UNKNOWN: None, LinkStatus.UP: "ok", LinkStatus.DOWN: "failed"}


class LinkObserver:
    """The :class:`~fleetd.herdr.control.Around` of the control link: given to
    :meth:`~fleetd.herdr.control.AgentControl.observe`, it sees every port call once, counts it and
    records its outcome; behaviour is the port's."""

    def __init__(
        self,
        *,
        clock: Clock,
        state: LinkState | None = None,
        metrics: Metrics | None = None,
        agents: LiveAgents | None = None,
    ):
        self.clock = clock
        self.state = state if state is not None else LinkState()
        self.metrics = metrics
        self.agents = agents

    async def __call__(self, method: str, call: Awaitable[T], /) -> T:
        try:
            result = await call
        except ControlLinkError as exc:
            self._list_failed(method)
            self._count(method, "link_failed")
            if self.state.consecutive_failures == 0:
                self.state.failing_since = self.clock.now()
            self.state.status = LinkStatus.DOWN
            self.state.last_failure_at = self.clock.now()
            self.state.last_failure_code = exc.code
            self.state.consecutive_failures += 1
            raise
        except HerdrError:
            self._list_failed(method)
            self._count(method, "error")
            self._ok()  # herdr answered with an error frame: the link itself works
            raise
        self._count(method, "ok")
        self._ok()
        if isinstance(result, Pong):
            self.state.herdr_version = result.version
            self.state.herdr_protocol = result.protocol
        elif self.agents is not None and method == "get_agent" and isinstance(result, AgentInfo):
            self.agents.seen(result)
        elif self.agents is not None and method == "list_agents" and isinstance(result, tuple):
            self.agents.listed(result, self.clock.now())
        return result

    def _list_failed(self, method: str) -> None:
        if self.agents is not None and method == "list_agents":
            self.agents.list_failed()

    def _count(self, method: str, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.herdr_requests_total.labels(method=method, outcome=outcome).inc()

    def _ok(self) -> None:
        self.state.status = LinkStatus.UP
        self.state.last_ok_at = self.clock.now()
        self.state.consecutive_failures = 0
        self.state.failing_since = None
