"""Lost-boundary repair as the health core sees it: when to ask, and what the incident says.

TURN_BOUNDARY_LOST asks the bridge to reconcile the open turn's token once
(``RequestLostBoundaryRepair``, within the pane budget). The bridge answers on the next
snapshot's :class:`~fleetd.health.snapshot.RepairView`: the typed result, the attempts so far and
when one more request may be made. Health asks again for the same token only when that time has
come and every earlier request was answered; the bridge enforces its own limits (one delayed retry
after a refused scrape, none after a missing capture or baseline) whatever health asks.

Each new answer updates the open TURN_BOUNDARY_LOST incident's evidence (result and detail codes,
attempts, whether a retry is scheduled, and that no reply was reconstructed and no task replayed:
a refused repair leaves the ticket pending) and, when the incident went to a lead, publishes it to
that lead again. Only codes and counts: never pane text.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from fleetd.health.effects import PublishHealthRecord, UpdateIncident
from fleetd.health.incidents import Evidence, IncidentKey
from fleetd.health.snapshot import OpenTurn
from fleetd.health.tick import Tick

__all__ = [
    "REPAIR_EVIDENCE_KEYS",
    "repair_due",
    "repair_evidence",
    "repair_requests_after",
    "retry_deadline",
    "sync_repair_evidence",
]

REPAIR_EVIDENCE_KEYS: Final = (
    "repair_result",
    "repair_detail",
    "repair_attempts",
    "repair_retry",
    "reply_reconstructed",
    "task_replayed",
)


def repair_due(
    turn: OpenTurn | None, *, token: str | None, asked: str | None, requests: int, now: datetime
) -> bool:
    """Whether TURN_BOUNDARY_LOST may ask to reconcile ``token`` now.

    ``asked`` is the token the last granted request named and ``requests`` how many were granted
    for it. A new token is asked once; the same token again only when the bridge scheduled a retry
    that is due and has answered every request so far.
    """
    if token is None:
        return False
    if asked != token:
        return True
    repair = turn.repair if turn is not None else None
    return (
        repair is not None
        and repair.retry_at is not None
        and now >= repair.retry_at
        and repair.attempts >= requests
    )


def repair_requests_after(asked: str | None, requests: int, granted: str | None) -> int:
    """Granted requests for ``granted`` once one more was granted."""
    return requests + 1 if asked == granted else 1


def retry_deadline(turn: OpenTurn | None) -> datetime | None:
    """When a scheduled repair retry of the open turn comes due (a recheck time), if any."""
    repair = turn.repair if turn is not None else None
    return repair.retry_at if repair is not None else None


def repair_evidence(turn: OpenTurn | None) -> Evidence:
    """The incident evidence of the bridge's last repair answer for the open turn."""
    repair = turn.repair if turn is not None else None
    if repair is None:
        return ()
    return (
        ("repair_result", repair.result),
        ("repair_detail", repair.detail),
        ("repair_attempts", str(repair.attempts)),
        ("repair_retry", "scheduled" if repair.retry_at is not None else "none"),
        ("reply_reconstructed", "false"),  # the turn is still open: nothing was rebuilt
        ("task_replayed", "false"),  # nothing ever replays a delivered task
    )


def sync_repair_evidence(tick: Tick, key: IncidentKey, turn: OpenTurn | None) -> None:
    """Bring the open incident's repair evidence up to date; tell its lead about a new answer."""
    held = tick.book.open.get(key)
    pairs = repair_evidence(turn)
    if held is None or not pairs:
        return
    evidence = (*(p for p in held.evidence if p[0] not in REPAIR_EVIDENCE_KEYS), *pairs)
    if evidence == held.evidence:
        return
    updated = tick.book.amend(held, evidence=evidence)
    tick.effects.append(UpdateIncident(incident=updated))
    assignment = updated.assignment
    if assignment is not None and assignment.recipient is not None:
        tick.effects.append(
            PublishHealthRecord(
                recipient_lead=assignment.recipient,
                incident=updated,
                generation=assignment.generation,
                reason=assignment.reason,
                on_behalf_of=assignment.on_behalf_of,
                recipient_terminal=None,
            )
        )
