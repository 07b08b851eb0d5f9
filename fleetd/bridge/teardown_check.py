"""The post-teardown invariant (M4 §8.5), checked apart from the failure operation it guards.

Every terminal cause for a target goes through one idempotent target-wide failure operation
(:meth:`~fleetd.bridge.lifecycle.TargetLifecycle.fail_target_work`) and one release
(:class:`~fleetd.bridge.teardown.Teardown`). This module does not trust either: it reads what the
bridge holds for a released target through the same lookups the send, delivery and poll paths
use, and names each part of the invariant that does not hold. A violation is a bridge bug, not a
slow member; health turns it into DELEGATION_ORPHANED (:mod:`fleetd.health.member_rules`), and
the monitor may run the failure operation once more — it never recreates a task.

==========================================  ================================================
§8.5 says, after teardown                   what is read here (violated when ...)
==========================================  ================================================
no injector entry exists for the target     the target still has a send queue
no accepted turn or completion record       an open turn, or a last-delivered ticket, is kept
no rendezvous waiter or ask exists          a ticket of the target still has a caller waiting
every async task is terminal                a ticket of the target is still pending
no send waiting on the target's lock can    the target's send gate is open
later accept it
new sends fail immediately                  a lookup by session id, agent name or pane id
                                            still finds the session
each old task has one terminal outcome      a ticket the target held at teardown is not
and one metric count                        terminal, or was counted other than once
==========================================  ================================================

The tickets the target held when its teardown began are recorded on the session
(``teardown_tickets``); one that aged out of the task book ended long ago and is not read.
The check runs when a release ends, after the monitor's retry of the failure operation, and on
each health tick for a released session the roster marked as changed (a late write — a delivery,
a reply, a repair finishing after teardown — marks its session), so a regression that appears
after teardown is seen too. It reads; it never repairs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from enum import StrEnum

from fleetd.bridge.roster import Roster
from fleetd.bridge.sessions import Session
from fleetd.bridge.tasks import TaskBook

__all__ = ["TeardownInvariant", "check_teardown", "recheck_teardowns", "record_teardown"]

_log = logging.getLogger("fleetd.bridge")


class TeardownInvariant(StrEnum):
    """One part of the §8.5 invariant, named as health's cause code when it is violated."""

    QUEUE = "queue_after_teardown"
    TURN = "turn_after_teardown"
    WAITER = "waiter_after_teardown"
    PENDING = "pending_after_teardown"
    SEND_GATE = "send_gate_open_after_teardown"
    ACCEPTS_SENDS = "accepts_sends_after_teardown"
    OUTCOME = "outcome_not_once_after_teardown"


_I = TeardownInvariant


def check_teardown(
    session: Session, *, roster: Roster, tasks: TaskBook
) -> tuple[TeardownInvariant, ...]:
    """The parts of the invariant a released ``session`` violates, in §8.5 order (empty: holds)."""
    sid = session.session_id
    pending = tasks.pending_for(sid)
    old = [t for t in (tasks.get(i) for i in session.teardown_tickets) if t is not None]
    broken: list[TeardownInvariant] = []
    if sid in roster.queues:
        broken.append(_I.QUEUE)
    if sid in roster.inflight or tasks.last_delivered(sid) is not None:
        broken.append(_I.TURN)
    if any(ticket.waited_on for ticket in (*pending, *old)):
        broken.append(_I.WAITER)
    if pending:
        broken.append(_I.PENDING)
    if sid not in roster.gates:
        broken.append(_I.SEND_GATE)
    if roster.finds(session):
        broken.append(_I.ACCEPTS_SENDS)
    if any(not ticket.terminal or ticket.counted != 1 for ticket in old):
        broken.append(_I.OUTCOME)
    return tuple(broken)


def record_teardown(session: Session, *, roster: Roster, tasks: TaskBook) -> bool:
    """Check a released session and keep the answer on it (health reads it from the member's
    view); a change is logged once, a violation as a WARNING. True when the answer changed."""
    found = tuple(v.value for v in check_teardown(session, roster=roster, tasks=tasks))
    if found == session.teardown_violations:
        return False
    roster.update(session.session_id, teardown_violations=found)
    if found:
        _log.warning(
            "session %s: teardown invariant violated (%s); health reports DELEGATION_ORPHANED",
            session.session_id,
            ", ".join(found),
        )
    else:
        _log.info("session %s: teardown invariant holds again", session.session_id)
    return True


def recheck_teardowns(session_ids: Iterable[str], *, roster: Roster, tasks: TaskBook) -> bool:
    """Check again the released sessions among ``session_ids`` (the members the roster's writes
    touched since the last tick). True when an answer changed (the roster then holds a new value
    of that session)."""
    sessions = roster.sessions
    changed = False
    for sid in session_ids:
        session = sessions.get(sid)
        if session is not None and not session.live:
            changed |= record_teardown(session, roster=roster, tasks=tasks)
    return changed
