"""What health retains about a lead across ticks (M4 §4.4, Unit 4 criteria 3 and 4)."""

from __future__ import annotations

from datetime import timedelta

from fleetd.health import HealthSettings, LeadState, LiveStatus, LiveView, OpenIncident
from tests.unit.health.health_fleet import T0, TICK, Run, agent, failed_list, lead, live

L, LS = LiveStatus, LeadState


def only(status: LiveStatus | None, targeted: dict[str, str] | None = None) -> LiveView:
    agents = () if status is None else (agent("lead-a", status),)
    return live(*agents, targeted=targeted, with_lead=False)


def test_sightings_keep_first_seen_last_seen_and_the_raw_status_age() -> None:
    """First seen stays, last seen moves with each successful sighting, a blind tick keeps all."""
    run = Run()
    run.tick(only(L.WORKING))
    first = run.now
    run.tick(only(L.WORKING))
    evidence = run.state.leads["lead-a"]
    assert (evidence.first_seen_at, evidence.last_seen_at) == (first, run.now)
    assert (evidence.raw_status, evidence.raw_since) == (L.WORKING, first)
    run.tick(failed_list(ping=True))
    assert run.state.leads["lead-a"] == evidence
    run.tick(only(L.UNKNOWN))
    run.tick(only(L.UNKNOWN))
    evidence = run.state.leads["lead-a"]
    assert (evidence.state, evidence.raw_status) == (LS.LEAD_STATUS_UNKNOWN, L.UNKNOWN)
    assert evidence.raw_since == run.now - TICK
    assert evidence.first_seen_at == first
    run.tick(only(None))
    evidence = run.state.leads["lead-a"]
    assert (evidence.absent, evidence.last_seen_at, evidence.first_seen_at) == (
        1,
        run.now - TICK,
        first,
    )


def test_a_lead_never_seen_has_no_sighting() -> None:
    """Absent from the start: no first or last sighting, only the absences are counted."""
    run = Run()
    run.tick(only(None))
    evidence = run.state.leads["lead-a"]
    assert (evidence.first_seen_at, evidence.last_seen_at, evidence.absent) == (None, None, 1)


def test_failed_lookups_keep_their_error_class_and_streak() -> None:
    """A timeout is no target loss, but its code and the failure streak are kept; a sighting
    ends the streak and a ``*_not_found`` makes the lead unreachable at once."""
    run = Run()
    run.tick(only(L.IDLE))
    run.tick(only(None))
    run.tick(only(None, {"lead-a": "timeout"}))
    evidence = run.state.leads["lead-a"]
    assert (evidence.lookup_error, evidence.lookup_failures, evidence.not_found_code) == (
        "timeout",
        1,
        None,
    )
    run.tick(only(L.IDLE))
    evidence = run.state.leads["lead-a"]
    assert (evidence.state, evidence.lookup_error, evidence.lookup_failures) == (
        LS.LEAD_IDLE,
        "timeout",
        0,
    )
    run.tick(only(None))
    run.tick(only(None, {"lead-a": "timeout"}))
    run.tick(only(None, {"lead-a": "agent_not_found"}))
    evidence = run.state.leads["lead-a"]
    assert (evidence.lookup_error, evidence.lookup_failures) == ("agent_not_found", 2)
    assert evidence.state is LS.LEAD_UNREACHABLE


def test_the_unreachable_incident_names_the_lookup_error() -> None:
    """The incident's evidence carries the failed call's code, never its message."""
    run = Run()
    run.tick(only(None, {"lead-a": "agent_not_found"}))
    [opened] = run.effects(OpenIncident)
    assert dict(opened.incident.evidence)["lookup_error"] == "agent_not_found"


def test_push_and_nudge_outcomes_are_kept_and_the_unresponsive_incident_shows_them() -> None:
    """The bridge's report (status read, error, nudges, cap, oldest item) is evidence."""
    run = Run(settings=HealthSettings(lead_unresponsive_after=timedelta(0)))
    capped = lead(
        actionable_waiting=2,
        oldest_actionable_at=T0,
        nudges_sent=3,
        nudge_cap_reached_at=T0,
        push_status=L.IDLE,
        last_push_error="timeout",
        last_nudge_at=T0,
        last_heartbeat_at=T0 - timedelta(hours=1),
    )
    run.tick(only(L.IDLE), leads=[capped], advance=timedelta(minutes=10))
    assert run.lead() is LS.LEAD_UNRESPONSIVE
    evidence = run.state.leads["lead-a"]
    assert (
        evidence.actionable_waiting,
        evidence.oldest_actionable_at,
        evidence.nudges_sent,
        evidence.nudge_cap_reached_at,
        evidence.push_status,
        evidence.last_push_error,
        evidence.last_nudge_at,
        evidence.last_heartbeat_at,
    ) == (2, T0, 3, T0, L.IDLE, "timeout", T0, T0 - timedelta(hours=1))
    [opened] = run.effects(OpenIncident)
    shown = dict(opened.incident.evidence)
    assert (shown["nudges_sent"], shown["actionable_waiting"]) == ("3", "2")
    assert shown["oldest_actionable_seconds"] == str(int((run.now - T0).total_seconds()))


def test_a_lead_leaving_the_identity_map_keeps_its_last_report() -> None:
    """Inside the retirement grace the last report stands: the retained identity has none."""
    run = Run()
    reported = lead(actionable_waiting=1, oldest_actionable_at=T0, nudges_sent=1)
    run.tick(only(L.WORKING), leads=[reported])
    run.tick(only(L.WORKING), leads=[])
    evidence = run.state.leads["lead-a"]
    assert evidence.identity_missing == 1
    assert (evidence.actionable_waiting, evidence.nudges_sent) == (1, 1)
