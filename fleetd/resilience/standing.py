"""Where each endpoint of a pool stands, and why: the words ``fleet_list.dependencies`` shows.

A dependency's surface names, per endpoint, whether it is the one in use and, if not, why not
(RFC 0018 §4.4: "which endpoint is active and why"). :func:`standing` reads it off the pool's
records and the index the adapter is using right now, in this order:

* ``ACTIVE`` — the adapter's calls go here now;
* ``DISABLED`` — the endpoint retired itself (a webhook receiver that answered 410 Gone) and is
  not dialed until an operator acts; the adapter knows this, the pool does not, so it says so
  (``disabled=True``);
* ``BREAKER_OPEN`` — skipped until its cooldown ends (``ready_at``);
* ``PROBE_DUE`` — its cooldown has ended: the next consult sends the one half-open probe;
* ``UNREACHABLE`` — its breaker is closed but the last attempt got no answer;
* ``RETURN_PENDING`` — healthy and ahead of the active one in the list: sticky primary will
  move back to it (after its probe is answered);
* ``STANDBY`` — healthy, after the active one: used when those before it fail.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from fleetd.resilience.breaker import BreakerState
from fleetd.resilience.failover import Endpoint

__all__ = ["Standing", "standing"]


class Standing(StrEnum):
    ACTIVE = "active"
    DISABLED = "disabled"
    BREAKER_OPEN = "breaker_open"
    PROBE_DUE = "probe_due"
    UNREACHABLE = "unreachable"
    RETURN_PENDING = "return_pending"
    STANDBY = "standby"


def standing(
    endpoint: Endpoint, index: int, active: int | None, now: datetime, *, disabled: bool = False
) -> Standing:
    """Where endpoint ``index`` stands at ``now`` while ``active`` is in use (``None``: none)."""
    if index == active:
        return Standing.ACTIVE
    if disabled:
        return Standing.DISABLED
    state = endpoint.breaker.state_at(now)
    if state is BreakerState.OPEN:
        return Standing.BREAKER_OPEN
    if state is BreakerState.HALF_OPEN:
        return Standing.PROBE_DUE
    if endpoint.health.reachable is False:
        return Standing.UNREACHABLE
    if active is not None and index < active:
        return Standing.RETURN_PENDING
    return Standing.STANDBY
