"""A restart resumes from the journal's open incidents: claimed when the evidence holds again,
closed when it does not, never opened twice (M4 §10.3, issue 11)."""

from __future__ import annotations

import dataclasses

from fleetd.health import (
    InboxFailureView,
    LeadState,
    OpenIncident,
    ResolveIncident,
    UpdateIncident,
)
from fleetd.health.adoption import adopt_late, resume
from fleetd.health.evidence import HealthState
from fleetd.health.incidents import IncidentKey, ResolveReason
from fleetd.health.states import InboxState, Scope
from tests.unit.health.health_fleet import T0, Run, agent, failed_list, lead, live, member

LEADS = (lead("lead-a"), lead("lead-b"))


def _first_run_with_a_dead_lead() -> Run:
    """lead-a vanished: two absences with a working ping make it LEAD_UNREACHABLE."""
    run = Run()
    for _ in range(3):
        run.tick(live(agent("lead-b"), with_lead=False, ping=True), leads=LEADS)
    assert run.lead("lead-a") is LeadState.LEAD_UNREACHABLE
    return run


def _restarted(before: Run) -> Run:
    state = before.state
    return Run(now=before.now, state=resume(state.open_incidents(), state.generations))


def test_resume_adopts_every_open_incident_and_keeps_generations() -> None:
    """resume() adopts every open incident with its generation (or a newer stored one) and the
    generation floor it is given."""
    before = _first_run_with_a_dead_lead()
    [incident] = before.state.open_incidents()
    state = resume([incident], {})
    assert state.incidents == {incident.key: incident}
    assert state.generations == {incident.key: incident.generation}
    assert state.adopted == {incident.key: 2}
    newer = resume([incident], {incident.key: 5})
    assert newer.generations == {incident.key: 5}
    assert (state.generation_floor, resume([incident], {}, floor=9).generation_floor) == (0, 9)


def test_evidence_that_holds_again_claims_the_same_incident_without_a_second_open() -> None:
    """After a restart, evidence that still holds claims the adopted incident (same id and
    generation) with no second open and no resolve."""
    before = _first_run_with_a_dead_lead()
    [incident] = before.state.open_incidents()
    run = _restarted(before)
    for _ in range(3):
        run.tick(live(agent("lead-b"), with_lead=False, ping=True), leads=LEADS)
    assert run.all_effects(OpenIncident) == []
    assert run.all_effects(ResolveIncident) == []
    [held] = run.state.open_incidents()
    assert (held.id, held.generation) == (incident.id, incident.generation)
    assert run.state.adopted == {}


def test_an_incident_the_evidence_no_longer_shows_is_cleared_after_two_snapshots() -> None:
    """An adopted incident the evidence no longer shows resolves as cleared after two sighted
    snapshots; a blind tick counts for nothing."""
    before = _first_run_with_a_dead_lead()
    run = _restarted(before)
    both = live(agent("lead-a"), agent("lead-b"), with_lead=False)
    run.tick(failed_list(ping=False), leads=LEADS)  # a blind tick counts nothing
    run.tick(both, leads=LEADS)
    assert run.all_effects(ResolveIncident) == []
    run.tick(both, leads=LEADS)
    [resolved] = run.effects(ResolveIncident)
    assert resolved.reason is ResolveReason.CLEARED
    assert run.state.open_incidents() == ()
    assert run.state.adopted == {}


def test_a_member_of_the_previous_run_is_retired_not_replayed() -> None:
    """An adopted incident about a member the new run does not have resolves as subject_retired and
    is never opened again."""
    first = Run()
    gone = {"m1": "agent_not_found"}
    for _ in range(3):
        first.tick(live(targeted=gone), [member()])
    assert [i.scope for i in first.state.open_incidents()] == ["member"]
    run = _restarted(first)
    for _ in range(2):
        run.tick(live())  # the new run has no such member
    [resolved] = run.effects(ResolveIncident)
    assert resolved.reason is ResolveReason.SUBJECT_RETIRED
    assert run.all_effects(OpenIncident) == []


def test_a_claim_with_a_new_owner_is_an_update() -> None:
    """An adopted member incident claimed again under a new owning lead is an UpdateIncident naming
    that owner, not a new open."""
    first = Run()
    gone = {"m1": "agent_not_found"}
    for _ in range(3):
        first.tick(live(targeted=gone), [member()])
    run = _restarted(first)
    run.tick(live(targeted=gone), [member(owner="lead-b")], leads=(lead(), lead("lead-b")))
    assert run.all_effects(OpenIncident) == []
    [update] = [u for u in run.effects(UpdateIncident) if u.incident.scope == "member"]
    assert update.incident.owner_lead == "lead-b"
    assert run.state.adopted == {}


def test_inbox_incidents_are_held_by_their_own_step_not_adopted() -> None:
    """Inbox decode incidents are not put up for adoption: the inbox step holds the same incident
    across the restart without reopening it."""
    first = Run()
    failure = InboxFailureView(
        key="lead-a",
        reason="malformed_json",
        message_id="m-1",
        unsettled=True,
        occurrences=1,
        last_seen_at=T0,
    )
    for _ in range(2):
        first.tick(live(), inbox_failures=[failure])
    [kept] = first.state.open_incidents()
    run = _restarted(first)
    assert run.state.adopted == {}
    for _ in range(3):
        run.tick(live(), inbox_failures=[failure])
    assert run.state.open_incidents() == (kept,)
    assert run.all_effects(OpenIncident) == []


def test_a_journal_read_late_adopts_its_incidents_into_the_running_state() -> None:
    """The journal answers only after the start: its open incidents join what this run holds,
    adopted as at a start (an evidence-driven one gets two snapshots' patience, an inbox one is
    held by its own step), and its generations and floor are known from then on."""
    before = _first_run_with_a_dead_lead()
    [incident] = before.state.open_incidents()
    inbox = dataclasses.replace(
        incident,
        id="inc_" + "1" * 24,
        key=IncidentKey(
            scope=Scope.INBOX, subject="lead-b", state=InboxState.INBOX_DECODE_FAILED, cause="x"
        ),
    )
    late = adopt_late(HealthState(), [incident, inbox], {incident.key: 4}, floor=7)
    assert late.state.incidents == {incident.key: incident, inbox.key: inbox}
    assert late.state.adopted == {incident.key: 2}
    assert late.state.generations == {incident.key: 4, inbox.key: inbox.generation}
    assert late.state.generation_floor == 7
    assert (late.superseded, late.renumbered) == ((), ())
    assert adopt_late(late.state, [incident], {}).state.incidents == late.state.incidents


def test_a_key_this_run_opened_again_supersedes_the_journals_and_renumbers_this_runs() -> None:
    """While the journal was away this run opened the same key anew: the journal's incident is
    superseded (its person is told it closed) and every generation this run gave the key moves up
    by the journal's highest, so the journal can take it; an incident numbered after that, and the
    journal's own, keep theirs."""
    before = _first_run_with_a_dead_lead()
    [journals] = before.state.open_incidents()
    mine = dataclasses.replace(journals, id="inc_" + "2" * 24, generation=2)
    running = HealthState(incidents={mine.key: mine}, generations={mine.key: 2})
    late = adopt_late(running, [dataclasses.replace(journals, generation=3)], {mine.key: 5})
    [superseded] = late.superseded
    assert superseded.id == journals.id
    [renumbered] = late.renumbered
    assert (renumbered.id, renumbered.generation) == (mine.id, 7)
    assert late.state.incidents == {mine.key: renumbered}
    assert late.state.generations == {mine.key: 7}
    assert late.state.adopted == {}
    resolved_earlier = dataclasses.replace(mine, id="inc_" + "3" * 24, generation=1)
    assert late.lifted(resolved_earlier).generation == 6  # noted later, lifted the same way
    assert late.lifted(renumbered) == renumbered  # numbered after the shift
    assert late.lifted(journals) == journals  # the journal's own
    nothing = adopt_late(running, [], {})  # a journal that never saw the key: nothing moves
    assert (nothing.renumbered, nothing.lifted(mine)) == ((), mine)


def test_a_key_the_journal_resolved_before_moves_this_runs_generations_above_its_floor() -> None:
    """The journal holds only resolved history (its floor): a key this run numbered from 1 moves
    above the floor, so the journal never refuses it as a generation it already holds."""
    before = _first_run_with_a_dead_lead()
    [incident] = before.state.open_incidents()
    mine = dataclasses.replace(incident, generation=1)
    running = HealthState(incidents={mine.key: mine}, generations={mine.key: 1})
    late = adopt_late(running, [], {}, floor=4)
    [renumbered] = late.renumbered
    assert renumbered.generation == 5
    assert late.state.generation_floor == 4
