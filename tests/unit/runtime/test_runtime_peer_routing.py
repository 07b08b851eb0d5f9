"""The runtime side of peer routing: the recipient's record, the superseded notice, the named
nudge, the retired lead's inbox key and the foreign-assignment gauge."""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import yaml

from fleetd.bridge.push import nudge_text
from fleetd.bridge.worktrees import FakeWorktrees
from fleetd.clock import FakeClock
from fleetd.compose import build_service
from fleetd.config import ConfigRef
from fleetd.health.effects import PublishHealthRecord, RetireLead, SupersedeAssignment
from fleetd.health.incidents import Assignment, Incident, IncidentKey, Route, RoutingReason
from fleetd.health.states import Certainty, LeadState, Scope, Severity
from fleetd.herdr.fake import FakeAgentControl
from fleetd.herdr.model import AgentInfo
from fleetd.inbox.memory import InMemoryInbox
from fleetd.inbox.records import InboxRecord, MessageKind
from fleetd.runtime.lead_records import superseded_record
from fleetd.testing import build_test_fleet, sample_document
from tests.metric_samples import sample

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
PEER = Assignment(
    route=Route.LEAD,
    recipient="lead-b",
    reason=RoutingReason.PEER_LEAD_INCIDENT,
    generation=1,
    on_behalf_of="lead",
)
INCIDENT = Incident(
    id="inc_peer",
    key=IncidentKey(
        scope=Scope.LEAD, subject="lead", state=LeadState.LEAD_UNREACHABLE, cause="target_lost"
    ),
    generation=1,
    target="lead",
    severity=Severity.CRITICAL,
    certainty=Certainty.CERTAIN,
    opened_at=T0,
    owner_lead=None,
    assignment=PEER,
)


def test_the_nudge_names_the_failed_leads_and_the_exact_call() -> None:
    """The inbox nudge gives the count and the exact fleet_poll call, and names the failed leads
    whose incidents it carries."""
    plain = nudge_text("lead-b", 2, [])
    assert (
        plain
        == 'fleetd: 2 message(s) wait in your inbox. Collect them with fleet_poll(target="lead-b").'
    )
    named = nudge_text("lead-b", 1, ["lead", "lead-c"])
    assert "health incidents of lead lead, lead-c, which cannot act" in named
    assert named.endswith('fleet_poll(target="lead-b").')


def test_a_superseded_notice_names_the_old_and_new_generation_and_where_it_went() -> None:
    """A superseded record goes to the lead that held the assignment, names both generations and the
    new recipient, or says a person has it now."""
    moved = replace(
        INCIDENT,
        assignment=Assignment(
            route=Route.LEAD,
            recipient="lead-c",
            reason=RoutingReason.PEER_LEAD_INCIDENT,
            generation=2,
            on_behalf_of="lead",
        ),
    )
    record = superseded_record(moved, PEER, now=T0, run="r00000001")
    assert record.recipient_lead == "lead-b"
    assert record.msg_id == "health-inc_peer-r1-superseded-r00000001"
    assert record.state == "SUPERSEDED"
    assert record.evidence == {
        "supersededGeneration": 1,
        "routingGeneration": 2,
        "routingReason": "peer_lead_incident",
        "newRecipient": "lead-c",
    }
    assert "now with lead lead-c" in (record.content or "")
    to_person = superseded_record(replace(moved, assignment=None), PEER, now=T0, run="r00000001")
    assert "now with a person" in (to_person.content or "")


async def test_a_peer_record_goes_to_the_recipient_key_and_arms_a_named_nudge(
    tmp_path: Path,
) -> None:
    """A peer lead's health record lands under the recipient's inbox key, never the failed lead's,
    and arms a nudge naming the lead it covers."""
    fleet = build_test_fleet(tmp_path)
    await fleet.service.own_lead_keys()
    dispatcher = fleet.service.health.dispatcher
    await dispatcher.apply(
        PublishHealthRecord(
            recipient_lead="lead-b",
            incident=INCIDENT,
            generation=1,
            reason=RoutingReason.PEER_LEAD_INCIDENT,
            on_behalf_of="lead",
            recipient_terminal=None,
        )
    )
    assert await fleet.inbox.collect("lead") == []  # never under the failed subject's key
    [record] = await fleet.inbox.collect("lead-b")
    assert record.kind is MessageKind.HEALTH
    assert record.evidence is not None
    assert record.evidence["onBehalfOf"] == "lead"
    assert fleet.service.push.covering == {"lead-b": {"lead"}}


async def test_a_superseded_assignment_tells_the_lead_that_held_it(tmp_path: Path) -> None:
    """When an assignment moves away from a lead, that lead gets a SUPERSEDED notice; a new
    generation to the same lead sends nothing."""
    fleet = build_test_fleet(tmp_path)
    await fleet.service.own_lead_keys()
    now_human = replace(
        INCIDENT,
        assignment=Assignment(
            route=Route.HUMAN,
            recipient=None,
            reason=RoutingReason.HUMAN_NO_HEALTHY_LEAD,
            generation=2,
        ),
    )
    await fleet.service.health.dispatcher.apply(
        SupersedeAssignment(incident=now_human, previous=PEER)
    )
    [notice] = await fleet.inbox.collect("lead-b")
    assert notice.state == "SUPERSEDED"
    same = replace(INCIDENT, assignment=replace(PEER, generation=2))
    await fleet.service.health.dispatcher.apply(SupersedeAssignment(incident=same, previous=PEER))
    assert await fleet.inbox.collect("lead-b") == []  # same recipient: nothing to retract


def _write(path: Path, document: dict[str, object], stamp: int) -> None:
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    os.utime(path, (stamp, stamp))


async def test_a_retired_lead_loses_its_key_only_once_nothing_waits_for_it(
    tmp_path: Path,
) -> None:
    """A lead removed from the config keeps its inbox key while a reply still waits in it, and gives
    it up on retirement once the queue is empty."""
    env = {"T_LEAD": "lead-token-0001", "T_SECOND": "second-token-0001"}
    path = tmp_path / "fleetd.yaml"
    two = [
        {"name": "lead", "tokenEnv": "T_LEAD"},
        {"name": "second", "tokenEnv": "T_SECOND"},
    ]
    document: dict[str, object] = {"leads": two, "profiles": {"codex": {"kind": "codex"}}}
    _write(path, document, 1_000)
    clock = FakeClock()
    inbox = InMemoryInbox()
    service = build_service(
        ConfigRef.load(path, env, now=clock.now()),
        environ=env,
        clock=clock,
        control=FakeAgentControl(),
        inbox=inbox,
        worktrees=FakeWorktrees(),
    )
    await service.own_lead_keys()
    await inbox.publish(
        InboxRecord(
            msg_id="m-1",
            kind=MessageKind.REPLY,
            target="member",
            recipient_lead="second",
            content="done",
            created_at_epoch_millis=1,
        )
    )
    document["leads"] = two[:1]
    _write(path, document, 2_000)
    await service.check_config()
    dispatcher = service.health.dispatcher
    retire = RetireLead(lead="second", agent_name="second", terminal_id=None)
    await dispatcher.apply(retire)
    assert "second" in service.bridge.lead_inboxes.owned  # a reply still waits in it
    await inbox.collect("second")
    await dispatcher.apply(retire)
    assert service.bridge.lead_inboxes.owned == {"lead"}


async def test_the_gauge_counts_foreign_assignments_per_configured_lead(tmp_path: Path) -> None:
    """fleet_lead_assigned_incidents counts, per configured lead, the open incidents it holds for
    another lead, zero for the others."""
    fleet = build_test_fleet(tmp_path, document=sample_document(tmp_path))
    monitor = fleet.service.health
    monitor.state = replace(monitor.state, incidents={INCIDENT.key: INCIDENT})
    monitor._refresh_gauges()
    gauge = fleet.service.metrics.lead_assigned_incidents
    assert sample(gauge, lead="lead-b") == 1
    assert sample(gauge, lead="lead") == 0
    monitor._refresh_gauges()  # the same incidents: the gauges stand as they are
    assert sample(gauge, lead="lead-b") == 1
    monitor.state = replace(monitor.state, incidents={})
    monitor._refresh_gauges()
    assert sample(gauge, lead="lead-b") == 0


async def test_a_peer_covered_while_a_push_pass_is_under_way_still_hears_the_failed_lead(
    tmp_path: Path,
) -> None:
    """A peer record lands while a push pass, having read the inboxes, asks herdr about another
    lead: the pass's stale empty reading of the peer's inbox does not forget the cover, so the
    peer's nudge still names the failed lead."""
    fleet = build_test_fleet(tmp_path)
    await fleet.service.own_lead_keys()
    push, dispatcher = fleet.service.push, fleet.service.health.dispatcher
    own = replace(INCIDENT, id="inc_own", owner_lead="lead", assignment=None)
    await dispatcher.apply(  # lead has a record waiting, so the pass asks herdr about it
        PublishHealthRecord(
            recipient_lead="lead",
            incident=own,
            generation=1,
            reason=RoutingReason.OWNER,
            on_behalf_of=None,
            recipient_terminal=None,
        )
    )
    asked = fleet.control.get_agent
    landed: list[str] = []

    async def get_agent(target: str) -> AgentInfo:
        if target == "lead" and not landed:  # the health tick dispatches meanwhile
            landed.append(target)
            await dispatcher.apply(
                PublishHealthRecord(
                    recipient_lead="lead-b",
                    incident=INCIDENT,
                    generation=1,
                    reason=RoutingReason.PEER_LEAD_INCIDENT,
                    on_behalf_of="lead",
                    recipient_terminal=None,
                )
            )
        return await asked(target)

    fleet.control.get_agent = get_agent  # type: ignore[method-assign]
    await push.push_once()
    assert landed
    assert push.covering == {"lead-b": {"lead"}}
    fleet.clock.advance(31)
    await push.push_once()
    [nudge] = [
        c.args["text"] for c in fleet.control.calls_to("prompt") if c.args["target"] == "lead-b"
    ]
    assert "health incidents of lead lead, which cannot act" in nudge
    await fleet.inbox.collect("lead-b")
    await push.push_once()
    assert push.covering == {}  # collected: the next nudge no longer names lead
