"""The effect dispatcher: one exhaustive ``match`` over ``Effect``, run on the fleet's fakes."""

from __future__ import annotations

import ast
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import cast, get_args

import pytest

import fleetd
from fleetd.health.effects import (
    CountMute,
    Effect,
    FailCause,
    FailTargetWork,
    OpenIncident,
    PublishHealthRecord,
    RecordTransition,
    RequestLostBoundaryRepair,
    RequestPaneProbe,
    RequestTargetLookup,
    ResolveIncident,
    RetireLead,
    RouteToHuman,
    RoutingReason,
    SupersedeAssignment,
    UpdateIncident,
)
from fleetd.health.incidents import Assignment, Incident, IncidentKey, ResolveReason, Route
from fleetd.health.pane_budget import ProbeReason
from fleetd.health.snapshot import ProbeSource
from fleetd.health.states import Certainty, MemberState, Scope, Severity
from fleetd.runtime.lead_records import health_record
from fleetd.testing import build_test_fleet, sample_document

T0 = datetime(2026, 1, 1, tzinfo=UTC)
OWNER = Assignment(route=Route.LEAD, recipient="lead", reason=RoutingReason.OWNER, generation=1)
INCIDENT = Incident(
    id="inc_dispatch",
    key=IncidentKey(scope=Scope.MEMBER, subject="s-1", state=MemberState.GONE, cause="gone"),
    generation=1,
    target="m1",
    severity=Severity.WARNING,
    certainty=Certainty.CERTAIN,
    opened_at=T0,
    owner_lead="lead",
    assignment=OWNER,
    evidence=(("ticket", "t-1"),),
)
HUMAN = Assignment(
    route=Route.HUMAN,
    recipient=None,
    reason=RoutingReason.HUMAN_NO_HEALTHY_LEAD,
    generation=2,
    on_behalf_of="lead",
)
ONE_OF_EACH: dict[type, Effect] = {
    OpenIncident: OpenIncident(incident=INCIDENT),
    UpdateIncident: UpdateIncident(incident=INCIDENT),
    RouteToHuman: RouteToHuman(
        incident=replace(INCIDENT, assignment=HUMAN),
        generation=2,
        reason=RoutingReason.HUMAN_NO_HEALTHY_LEAD,
        on_behalf_of="lead",
    ),
    SupersedeAssignment: SupersedeAssignment(
        incident=replace(INCIDENT, assignment=HUMAN), previous=OWNER
    ),
    ResolveIncident: ResolveIncident(
        incident=INCIDENT, reason=ResolveReason.CLEARED, resolved_at=T0
    ),
    PublishHealthRecord: PublishHealthRecord(
        recipient_lead="lead", incident=INCIDENT, generation=1, reason=RoutingReason.OWNER
    ),
    RetireLead: RetireLead(lead="old-lead", agent_name="old-lead", terminal_id=None),
    RequestPaneProbe: RequestPaneProbe(
        target="nobody",
        pane_id="no-pane",
        source=ProbeSource.VISIBLE,
        reason=ProbeReason.FINAL_EVIDENCE,
    ),
    RequestTargetLookup: RequestTargetLookup(target="nobody"),
    FailTargetWork: FailTargetWork(target="nobody", session_id="s-none", cause=FailCause.GONE),
    RequestLostBoundaryRepair: RequestLostBoundaryRepair(
        target="nobody", session_id="s-none", token="tok"
    ),
    CountMute: CountMute(target="nobody", session_id="s-none", profile="codex", count=1),
    RecordTransition: RecordTransition(
        scope=Scope.LEAD, subject="lead", target="lead", previous=None, current="LEAD_IDLE", at=T0
    ),
}


async def test_every_effect_in_the_union_has_a_case(tmp_path: Path) -> None:
    """Each Effect type reaches its own case: none falls through to ``assert_never``."""
    assert set(ONE_OF_EACH) == set(get_args(Effect))
    fleet = build_test_fleet(tmp_path, document=sample_document(tmp_path))
    await fleet.service.own_lead_keys()
    dispatcher = fleet.service.health.dispatcher
    for effect in ONE_OF_EACH.values():
        await dispatcher.apply(effect)
    assert dispatcher.pane_reads == 1
    probes, targeted = dispatcher.take_evidence()
    assert [(p.target, p.ok) for p in probes] == [("nobody", False)]
    assert targeted == {"nobody": "agent_not_found"}
    assert dispatcher.routing == {}  # noted by RouteToHuman, dropped by ResolveIncident
    messages = (await fleet.ok("fleet_poll"))["messages"]
    run = fleet.bridge.runs.current
    assert sorted(m["msgId"] for m in messages if m["kind"] == "health") == [
        f"health-inc_dispatch-r1-{run}",
        f"health-inc_dispatch-r1-superseded-{run}",  # the lead's assignment went to a person
    ]


async def test_an_effect_outside_the_union_is_refused(tmp_path: Path) -> None:
    """An unknown effect is never silently dropped: the exhaustive match raises."""
    fleet = build_test_fleet(tmp_path, document=sample_document(tmp_path))
    with pytest.raises(AssertionError):
        await fleet.service.health.dispatcher.apply(cast(Effect, object()))


def test_the_dispatcher_holds_the_only_match_over_effects() -> None:
    """No other module of fleetd matches on effect classes: the journal and sink plug in once."""
    names = {t.__name__ for t in get_args(Effect)}
    root = Path(fleetd.__file__).parent
    matching: set[str] = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.match_case):
                continue
            classes = {
                n.cls.id
                for n in ast.walk(node.pattern)
                if isinstance(n, ast.MatchClass) and isinstance(n.cls, ast.Name)
            }
            if classes & names:
                matching.add(path.relative_to(root).as_posix())
    assert matching == {"runtime/dispatch.py"}


def test_health_record_is_a_pure_function_of_incident_lead_now_and_run() -> None:
    """Same inputs, same record; the msg_id names the incident and the run."""
    now = datetime(2026, 1, 1, 0, 5, tzinfo=UTC)
    first = health_record(INCIDENT, lead="lead", now=now, run="run-a")
    assert first == health_record(INCIDENT, lead="lead", now=now, run="run-a")
    assert first.msg_id == "health-inc_dispatch-r1-run-a"
    assert health_record(INCIDENT, lead="lead", now=now, run="run-b").msg_id != first.msg_id
    assert (first.recipient_lead, first.target, first.subject_terminal) == ("lead", "m1", "s-1")
    assert first.first_seen_epoch_millis == int(T0.timestamp() * 1000)
    assert first.last_seen_epoch_millis == int(now.timestamp() * 1000)
    assert first.evidence == {"ticket": "t-1", "routingReason": "owner", "routingGeneration": 1}


def test_a_peer_record_goes_under_the_recipients_key_and_names_the_failed_lead() -> None:
    """A reassigned incident is a new record for the peer: its key, generation, on whose behalf."""
    peer = Assignment(
        route=Route.LEAD,
        recipient="peer",
        reason=RoutingReason.PEER_OWNER_UNHEALTHY,
        generation=2,
        on_behalf_of="lead",
    )
    now = datetime(2026, 1, 1, 0, 5, tzinfo=UTC)
    record = health_record(replace(INCIDENT, assignment=peer), lead="peer", now=now, run="run-a")
    owner_record = health_record(INCIDENT, lead="lead", now=now, run="run-a")
    assert (record.recipient_lead, record.msg_id) == ("peer", "health-inc_dispatch-r2-run-a")
    assert record.msg_id != owner_record.msg_id
    assert record.evidence == {
        "ticket": "t-1",
        "routingReason": "peer_owner_unhealthy",
        "routingGeneration": 2,
        "onBehalfOf": "lead",
    }
    assert "on behalf of lead lead" in record.content
    assert "on behalf of" not in owner_record.content


async def test_publish_puts_a_peer_record_in_the_recipients_inbox(tmp_path: Path) -> None:
    """The dispatcher publishes a peer's record through the owner's path, under the peer's key."""
    fleet = build_test_fleet(tmp_path, document=sample_document(tmp_path))
    await fleet.service.own_lead_keys()
    dispatcher = fleet.service.health.dispatcher
    peer = Assignment(
        route=Route.LEAD,
        recipient="lead",
        reason=RoutingReason.PEER_LEAD_INCIDENT,
        generation=3,
        on_behalf_of="other-lead",
    )
    incident = replace(INCIDENT, assignment=peer)
    await dispatcher.apply(
        PublishHealthRecord(
            recipient_lead="lead",
            incident=incident,
            generation=3,
            reason=RoutingReason.PEER_LEAD_INCIDENT,
            on_behalf_of="other-lead",
        )
    )
    messages = (await fleet.ok("fleet_poll"))["messages"]
    [record] = [m for m in messages if m["kind"] == "health"]
    assert record["evidence"]["onBehalfOf"] == "other-lead"
    assert record["msgId"] == f"health-inc_dispatch-r3-{fleet.bridge.runs.current}"
