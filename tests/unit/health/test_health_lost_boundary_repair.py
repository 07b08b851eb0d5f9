"""TURN_BOUNDARY_LOST and the bridge's repair answers: when health asks again, what leads read."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from fleetd.health import (
    LeadState,
    LiveStatus,
    MemberState,
    OpenTurn,
    PublishHealthRecord,
    RepairView,
    RequestLostBoundaryRepair,
    ResolveIncident,
    SessionState,
    UpdateIncident,
)
from fleetd.health.incidents import RoutingReason
from fleetd.health.repair import (
    repair_due,
    repair_evidence,
    repair_requests_after,
    retry_deadline,
)
from tests.unit.health.health_fleet import TICK, Run, agent, lead, live, member, turn

M, S, L = MemberState, SessionState, LiveStatus


def _lost(run: Run, repair: RepairView | None = None, *, advance: timedelta = TICK) -> None:
    view = member(state=S.BUSY, turn=replace(turn("tok-2", 2), repair=repair))
    run.tick(live(agent("m1", L.DONE)), [view], advance=advance)


def _refused(run: Run, *, attempts: int = 1, retry_in: timedelta | None) -> RepairView:
    retry_at = run.now + retry_in if retry_in is not None else None
    return RepairView(
        result="refused_unchanged", detail="same_as_baseline", attempts=attempts, retry_at=retry_at
    )


def _requests(run: Run) -> list[str]:
    return [e.token for e in run.all_effects(RequestLostBoundaryRepair)]


def test_a_scheduled_retry_is_asked_for_once_when_it_comes_due() -> None:
    """A refused scrape with a retry time: one more request for the token, at that time, once."""
    run = Run()
    _lost(run)
    _lost(run)
    assert _requests(run) == ["tok-2"]
    answer = _refused(run, retry_in=timedelta(seconds=60))
    _lost(run, answer)
    assert _requests(run) == ["tok-2"]  # not due yet (30 s of 60)
    _lost(run, answer)
    assert _requests(run) == ["tok-2", "tok-2"]
    _lost(run, answer)  # the bridge has not answered the second request yet
    _lost(run, answer)
    assert _requests(run) == ["tok-2", "tok-2"]
    stopped = RepairView(result="refused_unchanged", detail="same_as_baseline", attempts=2)
    for _ in range(4):
        _lost(run, stopped)
    assert _requests(run) == ["tok-2", "tok-2"]


def test_an_answer_without_a_retry_ends_the_requests_for_the_token() -> None:
    """A missing baseline gets no retry: health never asks for that token again."""
    run = Run()
    _lost(run)
    _lost(run)
    final = RepairView(result="refused_no_baseline", detail="baseline_unrecognised", attempts=1)
    for _ in range(6):
        _lost(run, final)
    assert _requests(run) == ["tok-2"]


def test_a_steady_member_is_rechecked_when_its_retry_comes_due() -> None:
    """The cheap steady path still wakes the member at the retry time, without other change."""
    run = Run()
    _lost(run)
    _lost(run)
    answer = _refused(run, retry_in=timedelta(seconds=95))
    for _ in range(3):
        _lost(run, answer, advance=timedelta(seconds=30))
    assert _requests(run) == ["tok-2"]
    assert run.state.members["s-m1"].recheck_at == answer.retry_at
    _lost(run, answer, advance=timedelta(seconds=30))
    assert _requests(run) == ["tok-2", "tok-2"]


def test_each_new_answer_updates_the_incident_and_tells_its_lead() -> None:
    """Result, detail, attempts and retry go into the incident; the lead gets it again."""
    run = Run()
    _lost(run)
    _lost(run)
    answer = _refused(run, retry_in=timedelta(seconds=60))
    _lost(run, answer)
    [update] = run.effects(UpdateIncident)
    evidence = dict(update.incident.evidence)
    assert {k: evidence[k] for k in list(evidence)[-6:]} == {
        "repair_result": "refused_unchanged",
        "repair_detail": "same_as_baseline",
        "repair_attempts": "1",
        "repair_retry": "scheduled",
        "reply_reconstructed": "false",
        "task_replayed": "false",
    }
    assert evidence["consecutive_snapshots"] == "2"
    [published] = run.effects(PublishHealthRecord)
    assert (published.recipient_lead, published.incident) == ("lead-a", update.incident)
    assert published.reason is RoutingReason.OWNER
    _lost(run, answer)
    assert not run.effects(UpdateIncident)  # the same answer again changes nothing
    assert run.member() is M.TURN_BOUNDARY_LOST


def test_an_incident_held_by_routing_is_updated_but_published_to_no_lead() -> None:
    """With its owner unreachable the incident has no recipient: only the update is emitted."""
    run = Run()
    view = member(state=S.BUSY, turn=turn("tok-2", 2))
    unreachable = lead()
    for _ in range(2):
        run.tick(live(agent("m1", L.DONE), with_lead=False), [view], leads=[unreachable])
    assert run.lead() is LeadState.LEAD_UNREACHABLE
    answer = _refused(run, retry_in=None)
    turned = member(state=S.BUSY, turn=replace(turn("tok-2", 2), repair=answer))
    run.tick(live(agent("m1", L.DONE), with_lead=False), [turned], leads=[unreachable])
    [update] = run.effects(UpdateIncident)
    assert update.incident.recipient_lead is None
    assert dict(update.incident.evidence)["repair_retry"] == "none"
    assert not [e for e in run.effects(PublishHealthRecord) if e.incident.id == update.incident.id]


def test_an_answer_already_there_when_the_incident_opens_is_in_its_first_evidence() -> None:
    """Evidence at opening carries the repair answer; no separate update follows."""
    run = Run()
    answer = RepairView(result="race_lost", detail="not_stable_at_prompt", attempts=1)
    _lost(run, answer)
    _lost(run, answer)
    assert run.member() is M.TURN_BOUNDARY_LOST
    assert not run.effects(UpdateIncident)
    [published] = run.effects(PublishHealthRecord)
    assert dict(published.incident.evidence)["repair_result"] == "race_lost"


@pytest.mark.parametrize(
    ("repaired_token", "reason"),
    [
        ("tok-2", "repaired"),  # repair resolved the very turn health asked about
        (None, "cleared"),  # the member's own reply ended the turn
        ("tok-1", "cleared"),  # an older turn was repaired, not this one
    ],
)
def test_a_turn_repair_resolved_closes_its_incident_as_repaired(
    repaired_token: str | None, reason: str
) -> None:
    """Issue 20 3c: once the bridge's repair resolves the lost turn, the TURN_BOUNDARY_LOST
    incident resolves as ``repaired`` (a trace of the repair), not ``cleared``."""
    run = Run()
    _lost(run)
    _lost(run)
    assert _requests(run) == ["tok-2"]
    [held] = run.state.open_incidents()
    done = member(state=S.DONE, turn=None, repaired_token=repaired_token)
    run.tick(live(agent("m1", L.DONE)), [done])
    [resolved] = run.effects(ResolveIncident)
    assert (resolved.incident.id, resolved.reason) == (held.id, reason)
    assert run.state.open_incidents() == ()


def test_repair_due_rules() -> None:
    """No token, a new token, and the same token with and without a due retry."""
    now = turn().accepted_at + timedelta(hours=1)
    due = RepairView(result="race_lost", detail="x", attempts=1, retry_at=now)
    later = replace(due, retry_at=now + timedelta(seconds=1))
    with_due = replace(turn("t"), repair=due)
    assert not repair_due(with_due, token=None, asked=None, requests=0, now=now)
    assert repair_due(turn("t"), token="t", asked="old", requests=3, now=now)
    assert not repair_due(turn("t"), token="t", asked="t", requests=1, now=now)
    assert not repair_due(None, token="t", asked="t", requests=1, now=now)
    assert repair_due(with_due, token="t", asked="t", requests=1, now=now)
    assert not repair_due(with_due, token="t", asked="t", requests=2, now=now)
    not_yet = replace(turn("t"), repair=later)
    assert not repair_due(not_yet, token="t", asked="t", requests=1, now=now)


def test_small_helpers() -> None:
    """Request counting, the retry deadline and evidence of a turn without an answer."""
    assert repair_requests_after("t", 1, "t") == 2
    assert repair_requests_after("old", 4, "t") == 1
    assert retry_deadline(None) is None
    assert retry_deadline(turn()) is None
    assert repair_evidence(None) == ()
    assert repair_evidence(turn()) == ()


def test_repair_view_needs_an_answer() -> None:
    """A repair view exists only once the bridge answered at least once."""
    with pytest.raises(ValueError, match="attempts"):
        RepairView(result="race_lost", detail="x", attempts=0)
    assert isinstance(replace(turn(), repair=None), OpenTurn)
