"""Incident keys, generations and edge-triggered effects (M4 §10.3)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from fleetd.health import (
    HealthState,
    Incident,
    IncidentKey,
    LiveStatus,
    MemberState,
    OpenIncident,
    ResolveIncident,
    Scope,
    SessionState,
    incident_id,
    suggested_tool_calls,
)
from fleetd.health.incidents import IncidentBook
from tests.unit.health.health_fleet import T0, Run, agent, inbox, live, member, turn

KEY = IncidentKey(
    scope=Scope.MEMBER, subject="s-1", state=MemberState.GONE, cause="agent_not_found"
)


def stranded_run() -> Run:
    run = Run()
    run.tick(
        live(agent("m1")), [member(uncollected_replies=1)], inboxes=[inbox("lead-a", capped=True)]
    )
    return run


def test_same_condition_over_time_is_one_incident_with_no_repeat_effects() -> None:
    """Ages and counts change, the key does not: one incident, effects only at the edge."""
    run = stranded_run()
    [opened] = run.effects(OpenIncident)
    for depth in range(2, 30):
        decision = run.tick(
            live(agent("m1")),
            [member(uncollected_replies=depth)],
            inboxes=[inbox("lead-a", depth, capped=True)],
            advance=timedelta(minutes=7),
        )
        assert decision.effects == ()
    assert run.state.open_incidents() == (opened.incident,)


def test_recurrence_after_resolution_gets_a_new_generation_and_id() -> None:
    """Resolve, recur: generation 2 with a different, deterministic id."""
    run = stranded_run()
    first = run.effects(OpenIncident)[0].incident
    run.tick(live(agent("m1")), [member()])
    assert [e.reason for e in run.effects(ResolveIncident)] == ["cleared"]
    run.tick(
        live(agent("m1")), [member(uncollected_replies=1)], inboxes=[inbox("lead-a", capped=True)]
    )
    second = run.effects(OpenIncident)[0].incident
    assert (first.generation, second.generation) == (1, 2)
    assert first.key == second.key
    assert first.id != second.id
    assert second.id == incident_id(second.key, 2)


def test_incident_ids_are_stable_hashes_of_key_and_generation() -> None:
    """Ids need no randomness: same key and generation, same id; anything else differs."""
    assert incident_id(KEY, 1) == incident_id(KEY, 1)
    assert incident_id(KEY, 1).startswith("inc_")
    other = IncidentKey(scope=Scope.MEMBER, subject="s-1", state=MemberState.GONE, cause="x")
    assert len({incident_id(KEY, 1), incident_id(KEY, 2), incident_id(other, 1)}) == 3


@pytest.mark.parametrize(
    ("digests", "signature"), [(("aaa", "aaa"), None), (("bbb", "bbb"), "claude.api_error_529")]
)
def test_fingerprints_hold_stable_codes_only(
    digests: tuple[str, str], signature: str | None
) -> None:
    """No digest, time or count ever reaches a key: only codes such as a signature id."""
    run = Run()
    busy = member(state=SessionState.BUSY, turn=turn())
    run.tick(live(agent("m1", LiveStatus.BLOCKED)), [busy])
    run.tick(live(agent("m1", LiveStatus.BLOCKED)), [busy])
    run.tick(
        live(agent("m1", LiveStatus.BLOCKED)),
        [busy],
        probes=run.answers(digest=digests[0], fatal_signature_id=signature),
    )
    for incident in run.state.open_incidents():
        fields = (incident.key.scope, incident.key.subject, incident.key.state, incident.key.cause)
        assert not any(d in f for d in digests for f in fields)
        assert str(T0.year) not in incident.key.cause
        assert not any(d in value for d in digests for _, value in incident.evidence)


def test_one_open_incident_per_key() -> None:
    """Opening an already-open key is a programming error, never a silent duplicate."""
    book = IncidentBook({}, {})
    book.open_new(KEY, now=T0, target="m1")
    with pytest.raises(ValueError, match="already open"):
        book.open_new(KEY, now=T0, target="m1")


def test_book_never_mutates_the_prior_state() -> None:
    """The prior mappings stay untouched; the book copies on first write."""
    opened: dict[IncidentKey, Incident] = {}
    generations: dict[IncidentKey, int] = {}
    book = IncidentBook(opened, generations)
    book.open_new(KEY, now=T0, target="m1")
    assert opened == {}
    assert generations == {}
    assert book.close(KEY) is not None
    assert book.close(KEY) is None


def test_generations_seeded_from_the_journal_continue_after_restart() -> None:
    """A restarted daemon seeded with the last generation never reuses an old id."""
    key = IncidentKey(
        scope=Scope.MEMBER,
        subject="s-m1",
        state=MemberState.REPLY_STRANDED,
        cause="push_cap_reached",
    )
    run = Run(state=HealthState(generations={key: 4}))
    run.tick(
        live(agent("m1")), [member(uncollected_replies=1)], inboxes=[inbox("lead-a", capped=True)]
    )
    assert run.effects(OpenIncident)[0].incident.generation == 5


def test_a_new_generation_is_above_the_journals_floor() -> None:
    """7b: after a restart a key the journal no longer lists opens above the floor (every stored
    generation), and decide carries the floor from tick to tick; a key known higher stays above
    its own last generation."""
    key = IncidentKey(
        scope=Scope.MEMBER,
        subject="s-m1",
        state=MemberState.REPLY_STRANDED,
        cause="push_cap_reached",
    )
    run = Run(state=HealthState(generation_floor=41))
    run.tick(live(agent("m1")), [member()], inboxes=[inbox("lead-a")])
    assert run.state.generation_floor == 41
    run.tick(
        live(agent("m1")), [member(uncollected_replies=1)], inboxes=[inbox("lead-a", capped=True)]
    )
    assert run.effects(OpenIncident)[0].incident.generation == 42
    assert run.state.generation_floor == 41
    book = IncidentBook({}, {key: 50}, floor=41)
    assert book.open_new(key, now=T0, target=None).generation == 51


def test_a_member_leaving_the_view_resolves_its_incidents_as_retired() -> None:
    """A subject that left the bridge view closes its incidents with subject_retired."""
    run = stranded_run()
    run.tick(live(), [])
    assert [e.reason for e in run.effects(ResolveIncident)] == ["subject_retired"]
    assert run.state.open_incidents() == ()
    assert run.state.generations == {}


def test_suggested_tool_calls_offer_status_and_list_never_only_stop() -> None:
    """Reports carry literal safe calls; stop is never the only action offered."""
    run = stranded_run()
    incident = run.state.open_incidents()[0]
    calls = suggested_tool_calls(incident)
    assert calls == ('fleet_status(sessionId="s-m1")', "fleet_list()")
    lead_incident = Incident(
        id="inc_x",
        key=IncidentKey(scope=Scope.LEAD, subject="a", state=MemberState.GONE, cause="c"),
        generation=1,
        target=None,
        severity=incident.severity,
        certainty=incident.certainty,
        opened_at=T0,
    )
    assert suggested_tool_calls(lead_incident) == ("fleet_list()",)
    assert (lead_incident.scope, lead_incident.subject, lead_incident.state) == (
        "lead",
        "a",
        "GONE",
    )


def test_a_namespace_makes_the_same_key_and_generation_a_different_id() -> None:
    """Two deployments (or one that lost its journal) never share an incident id, so a webhook
    receiver serving both never dedupes one's event against the other's."""
    assert incident_id(KEY, 1, "r0000000a") != incident_id(KEY, 1, "r0000000b")
    assert incident_id(KEY, 1, "r0000000a") != incident_id(KEY, 1)
    book = IncidentBook({}, {}, "r0000000a")
    opened = book.open_new(KEY, now=T0, target=None)
    assert opened.id == incident_id(KEY, 1, "r0000000a")
