"""The incident desk: the list is bounded and says when it was cut; only operators and leads ask;
a replay is what the replay callable (the escalation shell's, in the service) answers."""

from __future__ import annotations

from datetime import datetime

import pytest

from fleetd.identity import Caller, Role
from fleetd.journal.memory import InMemoryJournal
from fleetd.journal.values import IncidentChange
from fleetd.notify.desk import RESOLVED_WINDOW, IncidentDesk
from tests.contract.journal_cases import T0
from tests.unit.notify.sink_kit import human_incident

OPERATOR = Caller(role=Role.OPERATOR, name="operator")


async def _no_replay(incident_id: str, *, now: datetime) -> int | None:
    return None


async def test_the_list_is_cut_at_its_limit_and_says_so() -> None:
    """The incident list stops at its limit and says it was cut; the resolved window is reported."""
    journal = InMemoryJournal()
    for n in range(3):
        await journal.record(IncidentChange(incident=human_incident(f"sess_{n}")), now=T0)
    cut = await IncidentDesk(journal, replay=_no_replay, limit=2).incidents(OPERATOR, now=T0)
    assert (len(cut.incidents), cut.truncated, cut.limit) == (2, True, 2)
    assert cut.resolved_since == T0 - RESOLVED_WINDOW
    whole = await IncidentDesk(journal, replay=_no_replay, limit=3).incidents(OPERATOR, now=T0)
    assert (len(whole.incidents), whole.truncated) == (3, False)


async def test_only_an_operator_or_a_lead_may_list() -> None:
    """A member may not list incidents, and a limit below 1 is refused."""
    desk = IncidentDesk(InMemoryJournal(), replay=_no_replay)
    member = Caller(role=Role.MEMBER, name="m1", session_id="sess-1")
    with pytest.raises(ValueError, match="operator or a lead"):
        await desk.incidents(member, now=T0)
    with pytest.raises(ValueError, match="at least 1"):
        IncidentDesk(InMemoryJournal(), replay=_no_replay, limit=0)


async def test_a_replay_answers_what_the_replay_callable_did() -> None:
    """Unknown to the callable: not found; known: found, with its count of re-armed events."""
    asked: list[tuple[str, datetime]] = []

    async def replay(incident_id: str, *, now: datetime) -> int | None:
        asked.append((incident_id, now))
        return None if incident_id == "inc_missing" else 2

    desk = IncidentDesk(InMemoryJournal(), replay=replay)
    missing = await desk.replay("inc_missing", now=T0)
    assert (missing.found, missing.rearmed) == (False, 0)
    known = await desk.replay("inc_known", now=T0)
    assert (known.incident_id, known.found, known.rearmed) == ("inc_known", True, 2)
    assert asked == [("inc_missing", T0), ("inc_known", T0)]
