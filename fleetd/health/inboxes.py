"""Inbox keys: decode failures become one routed, redacted incident per key and reason (§7.2).

Theory of operation. The inbox adapter reports every entry it could not decode as a redacted
fact (:class:`~fleetd.health.snapshot.InboxFailureView`: key, reason code, safe message id,
whether the entry still sits on the queue, when it was last seen). Unit 3 criterion 8 asks that
such a failure reach the owning lead as a routed incident, without its content.

One incident is open per ``(key, reason)`` while the condition lasts:

* an **unsettled** entry — held for a newer build (``unsupported_version``) or still waiting for
  its quarantine copy — keeps it open, however old: the entry is still on the lead's queue;
* a **settled** entry (its confirmed copy is in ``agent.<key>.inbox.quarantine``) keeps it open
  for :data:`DECODE_FAILURE_HOLD` after it was last seen, long enough for the owning lead to be
  told, then it resolves; a new bad entry later opens a new generation and tells the lead again.

The owning lead is the lead whose inbox it is. While it is healthy it gets a typed health record;
otherwise (or for a key no lead owns) the incident goes to the router. Evidence holds codes and
counts and at most :data:`MESSAGE_IDS_SHOWN` safe message ids: never a body.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from fleetd.health.incidents import IncidentKey
from fleetd.health.snapshot import FleetSnapshot, InboxFailureView
from fleetd.health.states import InboxState, Scope
from fleetd.health.tick import Tick

__all__ = ["DECODE_FAILURE_HOLD", "MESSAGE_IDS_SHOWN", "step_inboxes"]

DECODE_FAILURE_HOLD: Final = timedelta(minutes=15)
"""How long a settled (quarantined) decode failure keeps its incident open."""

MESSAGE_IDS_SHOWN: Final = 5
"""At most this many message ids travel in an incident's evidence."""


def step_inboxes(tick: Tick, snapshot: FleetSnapshot) -> None:
    """Open, keep or resolve the INBOX_DECODE_FAILED incident of every key and reason."""
    groups: dict[IncidentKey, list[InboxFailureView]] = {}
    for failure in snapshot.inbox_failures:
        if failure.unsettled or tick.now - failure.last_seen_at < DECODE_FAILURE_HOLD:
            key = IncidentKey(
                scope=Scope.INBOX,
                subject=failure.key,
                state=InboxState.INBOX_DECODE_FAILED,
                cause=failure.reason,
            )
            groups.setdefault(key, []).append(failure)
    current = {key for key in tick.book.open if key.state is InboxState.INBOX_DECODE_FAILED}
    for key in sorted(current - groups.keys()):
        tick.sync_incident(key, None, target=None)
    leads = {lead.name for lead in snapshot.leads}
    for key in sorted(groups.keys() - current):
        failures = groups[key]
        ids = sorted({failure.message_id for failure in failures})
        tick.sync_incident(
            None,
            key,
            target=key.subject,
            owner_lead=key.subject if key.subject in leads else None,
            evidence=(
                ("reason", key.cause),
                ("entries", str(len(failures))),
                ("unsettled", str(sum(failure.unsettled for failure in failures))),
                ("messageIds", ",".join(ids[:MESSAGE_IDS_SHOWN])),
            ),
        )
