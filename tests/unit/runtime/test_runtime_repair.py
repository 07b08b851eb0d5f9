"""The monitor's side of lost-boundary repair: the one call, its metric, what the lead reads."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from fleetd.bridge.answers import wire
from fleetd.health.effects import RequestLostBoundaryRepair
from fleetd.health.incidents import Assignment, Incident, IncidentKey, Route, RoutingReason
from fleetd.health.states import Certainty, MemberState, Scope, Severity
from fleetd.runtime.health_views import open_incident
from fleetd.runtime.lead_records import health_record, health_summary
from fleetd.testing import build_test_fleet, sample_document
from tests.metric_samples import sample

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LOST = Incident(
    id="inc_lost",
    key=IncidentKey(
        scope=Scope.MEMBER, subject="s-1", state=MemberState.TURN_BOUNDARY_LOST, cause="busy"
    ),
    generation=1,
    target="m1",
    severity=Severity.WARNING,
    certainty=Certainty.STRONG,
    opened_at=T0,
    owner_lead="lead",
    assignment=Assignment(
        route=Route.LEAD, recipient="lead", reason=RoutingReason.OWNER, generation=1
    ),
    evidence=(("turn_number", "2"), ("consecutive_snapshots", "2")),
)
ANSWERED = replace(
    LOST,
    evidence=(
        *LOST.evidence,
        ("repair_result", "refused_unchanged"),
        ("repair_detail", "same_as_baseline"),
        ("repair_attempts", "1"),
        ("repair_retry", "scheduled"),
        ("reply_reconstructed", "false"),
        ("task_replayed", "false"),
    ),
)


async def test_the_repair_effect_calls_the_bridge_once_and_counts_the_result(
    tmp_path: Path,
) -> None:
    """RequestLostBoundaryRepair is one reconcile_lost_boundary call, counted by its result."""
    fleet = build_test_fleet(tmp_path, document=sample_document(tmp_path))
    dispatcher = fleet.service.health.dispatcher
    mark = len(fleet.control.calls)
    await dispatcher.apply(RequestLostBoundaryRepair(target="nobody", session_id="s", token="t"))
    assert sample(fleet.service.metrics.repairs_total, result="stale_turn") == 1
    assert fleet.control.calls[mark:] == []  # an unknown target: not even a lookup


def test_a_repair_answer_is_republished_under_its_own_id_and_says_nothing_was_rebuilt() -> None:
    """The lead reads the result, the retry plan, and that no reply or task was rebuilt."""
    first = health_record(LOST, lead="lead", now=T0, run="r")
    answered = health_record(ANSWERED, lead="lead", now=T0, run="r")
    assert first.msg_id == "health-inc_lost-r1-r"
    assert answered.msg_id == "health-inc_lost-r1-repair1-r"
    assert (first.recovery_tried, answered.recovery_tried) == (False, True)
    assert health_summary(ANSWERED) == (
        "fleetd health: member s-1 is TURN_BOUNDARY_LOST (strong, cause busy). Lost-boundary"
        " repair refused: refused_unchanged (same_as_baseline, attempt 1); one delayed retry is"
        " scheduled. No reply was reconstructed and no task was replayed: the ticket stays"
        " pending."
    )
    final = replace(ANSWERED, evidence=(*ANSWERED.evidence[:-3], ("repair_retry", "none")))
    assert "repair will not try this turn again" in health_summary(final)
    assert health_summary(LOST).endswith("No task was replayed.")


def test_the_fleet_list_incident_row_shows_the_repair_answer() -> None:
    """fleet_list: result, detail, attempts and retry, and that nothing was rebuilt."""
    assert "repair" not in wire(open_incident(LOST, now=T0, note=None))
    assert wire(open_incident(ANSWERED, now=T0, note=None))["repair"] == {
        "result": "refused_unchanged",
        "detail": "same_as_baseline",
        "attempts": 1,
        "retry": "scheduled",
        "replyReconstructed": False,
        "taskReplayed": False,
    }
