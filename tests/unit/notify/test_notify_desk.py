"""The incident desk: the list is bounded and says when it was cut; only operators and leads ask."""

from __future__ import annotations

import pytest

from fleetd.identity import Caller, Role
from fleetd.journal.memory import InMemoryJournal
from fleetd.journal.records import IncidentChange
from fleetd.notify.desk import RESOLVED_WINDOW, IncidentDesk
from tests.contract.journal_cases import T0
from tests.unit.notify.sink_kit import human_incident

OPERATOR = Caller(role=Role.OPERATOR, name="operator")


async def test_the_list_is_cut_at_its_limit_and_says_so() -> None:
    journal = InMemoryJournal()
    for n in range(3):
        await journal.record(IncidentChange(incident=human_incident(f"sess_{n}")), now=T0)
    cut = await IncidentDesk(journal, limit=2).incidents(OPERATOR, now=T0)
    assert (len(cut.incidents), cut.truncated, cut.limit) == (2, True, 2)
    assert cut.resolved_since == T0 - RESOLVED_WINDOW
    whole = await IncidentDesk(journal, limit=3).incidents(OPERATOR, now=T0)
    assert (len(whole.incidents), whole.truncated) == (3, False)


async def test_only_an_operator_or_a_lead_may_list() -> None:
    desk = IncidentDesk(InMemoryJournal())
    member = Caller(role=Role.MEMBER, name="m1", session_id="sess-1")
    with pytest.raises(ValueError, match="operator or a lead"):
        await desk.incidents(member, now=T0)
    with pytest.raises(ValueError, match="at least 1"):
        IncidentDesk(InMemoryJournal(), limit=0)
