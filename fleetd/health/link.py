"""The control link (M4 §4.3): is fleetd's view of herdr working at all?

CONTROL_LINK_DOWN needs two consecutive failed full-fleet lists (a compiled floor) *and* a failed
ping. A failed list with a working or unmeasured ping is not a link fault and never a member
fault: that tick is simply blind. Once down, the link stays down until a list succeeds again —
a ping coming back while lists still fail does not restore the view.
"""

from __future__ import annotations

from typing import Final

from fleetd.health.evidence import LinkEvidence
from fleetd.health.floors import TWO_SNAPSHOTS
from fleetd.health.incidents import IncidentKey
from fleetd.health.snapshot import LiveView
from fleetd.health.states import ControlLinkState, Scope
from fleetd.health.tick import Tick

__all__ = ["LINK_SUBJECT", "step_link"]

LINK_SUBJECT: Final = "herdr"
"""Stable subject id of the one control link."""

_DOWN_KEY: Final = IncidentKey(
    scope=Scope.CONTROL_LINK,
    subject=LINK_SUBJECT,
    state=ControlLinkState.CONTROL_LINK_DOWN,
    cause="list_and_ping_failed",
)


def step_link(tick: Tick, live: LiveView, prior: LinkEvidence) -> LinkEvidence:
    """Classify the link from this tick's list and ping results."""
    if live.list_ok:
        failures, state = 0, ControlLinkState.CONTROL_LINK_OK
    else:
        failures = min(prior.list_failures + 1, TWO_SNAPSHOTS)
        down = prior.state is ControlLinkState.CONTROL_LINK_DOWN or (
            failures >= TWO_SNAPSHOTS and live.ping_ok is False
        )
        state = ControlLinkState.CONTROL_LINK_DOWN if down else ControlLinkState.CONTROL_LINK_OK
    since = prior.since if prior.state is state and prior.since is not None else tick.now
    desired = _DOWN_KEY if state is ControlLinkState.CONTROL_LINK_DOWN else None
    if desired != prior.incident:
        tick.sync_incident(
            prior.incident,
            desired,
            target=None,
            evidence=(("consecutive_list_failures", str(failures)), ("ping", "failed")),
        )
    if (
        failures == prior.list_failures
        and state is prior.state
        and since == prior.since
        and desired == prior.incident
    ):
        return prior
    return LinkEvidence(state=state, since=since, list_failures=failures, incident=desired)
