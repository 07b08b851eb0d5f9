"""The journal's list for a lead follows the one visibility rule ``fleet_list`` follows
(:func:`fleetd.health.audience.lead_may_see`), on the fake, on SQLite and on PostgreSQL."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleetd.health.audience import lead_may_see
from fleetd.health.states import ControlLinkState, InboxState, LeadState, MemberState, Scope
from fleetd.journal.values import IncidentChange, Routing
from tests.contract.journal_cases import T0, make_incident

if TYPE_CHECKING:
    from tests.contract.journal_fixtures import JournalKit

pytest_plugins = ["tests.contract.journal_fixtures"]

LEADS = ("lead", "lead-b", "lead-c")


def _change(
    subject: str, scope: Scope, state: object, owner: str | None, recipient: str | None
) -> IncidentChange:
    incident = make_incident(subject, scope=scope, state=state, owner=owner)  # type: ignore[arg-type]
    return IncidentChange(
        incident=incident, routing=Routing(owner=owner, recipient=recipient, generation=1)
    )


CHANGES = [
    # its own lead incident, held by a peer: the case the journal used to leave out
    _change("lead", Scope.LEAD, LeadState.LEAD_UNREACHABLE, None, "lead-b"),
    # a peer's lead incident with a person
    _change("lead-c", Scope.LEAD, LeadState.LEAD_UNRESPONSIVE, None, None),
    # members: its own, a peer's held for it, a peer's, nobody's
    _change("sess_own", Scope.MEMBER, MemberState.GONE, "lead", "lead"),
    _change("sess_held", Scope.MEMBER, MemberState.MUTE, "lead-c", "lead"),
    _change("sess_peer", Scope.MEMBER, MemberState.GONE, "lead-b", "lead-b"),
    _change("sess_nobody", Scope.MEMBER, MemberState.GONE, None, None),
    # fleet-wide, with a person
    _change("herdr", Scope.CONTROL_LINK, ControlLinkState.CONTROL_LINK_DOWN, None, None),
    # a peer's inbox key
    _change("lead-b", Scope.INBOX, InboxState.INBOX_DECODE_FAILED, "lead-b", "lead-b"),
]


async def test_a_lead_lists_exactly_what_the_visibility_rule_lets_it_see(
    journal_kit: JournalKit,
) -> None:
    """For every lead, ``recent(involving=lead)`` holds exactly the incidents ``lead_may_see``
    allows: what it owns or holds, those about itself, and the fleet-wide ones."""
    journal = journal_kit.build()
    for change in CHANGES:
        await journal.record(change, now=T0)
    for lead in LEADS:
        expected = {
            change.incident.id
            for change in CHANGES
            if lead_may_see(
                lead,
                scope=change.incident.scope,
                subject=change.incident.subject,
                owner=change.effective_routing.owner,
                recipient=change.effective_routing.recipient,
            )
        }
        found = await journal.recent(resolved_since=T0, involving=lead)
        assert {stored.incident.id for stored in found} == expected, lead
    about_itself = await journal.recent(resolved_since=T0, involving="lead")
    assert CHANGES[0].incident.id in {stored.incident.id for stored in about_itself}
