"""fleet_list from a versioned view: built once per change, no herdr call per request."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

from fleetd.api.tools import Caller, Role
from fleetd.errors import HerdrError
from fleetd.herdr.model import AgentStatus
from fleetd.inbox.amqp_link import BrokerReport
from fleetd.inbox.memory import InMemoryInbox
from fleetd.inbox.records import InboxRecord, MessageKind
from fleetd.resilience import ErrorClass, Outcome, Pool
from fleetd.runtime.fleet_versions import LONG_POLL_SPACING_SECONDS
from fleetd.testing import TestFleet, build_test_fleet, hold_calls, sample_document

LEAD = Caller(role=Role.LEAD, name="lead")
LEAD_B = Caller(role=Role.LEAD, name="lead-b")
OPERATOR = Caller(role=Role.OPERATOR, name="operator")


class Brokered(InMemoryInbox):
    """An inbox with two brokers to report, the way the AMQP inbox reports them."""

    def __init__(self) -> None:
        super().__init__()
        self.state = BrokerReport(pool=Pool.of("0", "1"), active=0, reachable=True)

    def broker_report(self) -> BrokerReport:
        return self.state

    def called(self, index: int, outcome: Outcome, fleet: TestFleet) -> None:
        """One call the push loop made to broker ``index`` ended with ``outcome``."""
        pool = self.state.pool.observe(index, outcome, fleet.clock.now())
        self.state = BrokerReport(pool=pool, active=self.state.active, reachable=True)


async def _fleet(
    tmp_path: Path, *, health: bool = False, inbox: InMemoryInbox | None = None
) -> TestFleet:
    document = sample_document(tmp_path)
    document["health"] = {"enabled": health}
    fleet = build_test_fleet(tmp_path, document=document, inbox=inbox)
    await fleet.service.own_lead_keys()
    await fleet.service.observe_herdr()  # start() lists herdr's agents once
    return fleet


async def _listed(fleet: TestFleet, caller: Caller = OPERATOR) -> dict[str, Any]:
    return await fleet.ok("fleet_list", caller)


async def test_many_requests_make_no_herdr_call_and_one_build(tmp_path: Path) -> None:
    """Fifty fleet_list calls of an unchanged fleet, from three scopes: one build, no herdr call,
    and each scope answered with the very same view."""
    fleet = await _fleet(tmp_path)
    await fleet.spawn_ready()
    fleet.control.calls.clear()
    views = fleet.service.views
    builds = views.builds
    answers = [await _listed(fleet, (OPERATOR, LEAD, LEAD_B)[n % 3]) for n in range(50)]
    assert fleet.control.calls == []
    assert views.builds == builds + 1
    assert len({a["viewVersion"] for a in answers}) == 1
    assert await views.view(OPERATOR) is await views.view(OPERATOR)  # cut once per scope


async def test_every_bridge_change_moves_the_version(tmp_path: Path) -> None:
    """A spawn, a presence, a send, its delivery and its reply each show in a new version."""
    fleet = await _fleet(tmp_path)
    seen = [(await _listed(fleet))["viewVersion"]]

    async def moved() -> dict[str, Any]:
        view = await _listed(fleet)
        assert view["viewVersion"] > seen[-1]
        seen.append(view["viewVersion"])
        return view

    row = await fleet.ok("fleet_spawn", profile="sonnet")
    assert [m["state"] for m in (await moved())["members"]] == ["spawning"]
    await fleet.service.registry.contact(fleet.member(row["sessionId"]))
    assert [m["state"] for m in (await moved())["members"]] == ["ready"]
    ticket = (await fleet.ok("fleet_send", target=row["sessionId"], prompt="go"))["ticket"]
    member = (await moved())["members"][0]
    assert (member["state"], member["openTurn"]["ticket"]) == ("busy", ticket)
    await fleet.ok("fleet_reply", fleet.member(row["sessionId"]), content="done")
    member = (await moved())["members"][0]
    assert (member["state"], member["pendingTickets"]) == ("done", [])
    assert (await _listed(fleet))["viewVersion"] == seen[-1]  # nothing changed since


async def test_a_call_that_changes_nothing_moves_no_version(tmp_path: Path) -> None:
    """Refusals — a poll of an unknown ticket, a reply with no task open, a send to no member —
    and an empty drain leave the version (and so every long-poll and ETag) alone; a send that
    is accepted moves it."""
    fleet = await _fleet(tmp_path)
    sid = await fleet.spawn_ready()
    before = (await _listed(fleet))["viewVersion"]
    for _ in range(5):
        assert (await fleet.call("fleet_poll", ticket="t-0000")).error is not None
        assert (await fleet.call("fleet_send", target="nobody", prompt="go")).error is not None
        assert (await fleet.call("fleet_reply", fleet.member(sid), content="x")).error is not None
        await fleet.ok("fleet_poll", target="lead")  # an empty drain
    assert (await _listed(fleet))["viewVersion"] == before
    await fleet.ok("fleet_send", target=sid, prompt="go")
    assert (await _listed(fleet))["viewVersion"] > before


async def test_herdr_facts_come_from_the_loops_with_their_age(tmp_path: Path) -> None:
    """agents show the last list and its age; a status the poller read shows at once; a failed
    list shows agents null until one answers again."""
    fleet = await _fleet(tmp_path)
    sid = await fleet.spawn_ready()
    await fleet.ok("fleet_send", target=sid, prompt="go")
    fleet.clock.advance(4)
    view = await _listed(fleet)
    assert view["agentsAgeSeconds"] == 4.0  # listed at start, before the spawn
    assert view["agentsListedAt"] == "2026-01-01T00:00:00+00:00"
    fleet.set_status(sid, AgentStatus.WORKING)
    await fleet.poll()  # the poller reads the member: herdr's word reaches the view
    member = (await _listed(fleet))["members"][0]
    assert member["liveStatus"] == "working"
    fleet.clock.advance(10)
    await fleet.service.scheduler.run_once("herdr-agents")  # ten seconds on: listed again
    view = await _listed(fleet)
    assert view["agentsAgeSeconds"] == 0.0
    assert {a["name"] for a in view["agents"]} == {"lead", "lead-b", member["name"]}
    fleet.control.fail("list_agents", HerdrError("server_error", "herdr could not list"))
    fleet.clock.advance(10)
    await fleet.service.scheduler.run_once("herdr-agents")
    assert (await _listed(fleet))["agents"] is None
    fleet.control.fail("list_agents", None)
    await fleet.service.scheduler.run_once("herdr-agents")
    assert (await _listed(fleet))["agents"] is not None


async def test_with_health_on_the_tick_lists_and_the_loop_stays_quiet(tmp_path: Path) -> None:
    """The health tick's list serves the view; the herdr-agents loop adds none while ticks list."""
    fleet = await _fleet(tmp_path, health=True)
    for _ in range(3):
        fleet.clock.advance(10)
        await fleet.service.health.tick()
        await fleet.service.scheduler.run_once("herdr-agents")
    assert len(fleet.control.calls_to("list_agents")) == 1 + 3  # start, then one per tick
    assert (await _listed(fleet))["agentsAgeSeconds"] == 0.0


async def test_a_view_built_during_a_step_is_not_the_last_word(tmp_path: Path) -> None:
    """A view built while the poller awaits herdr (the baseline read after a delivery) is
    replaced by a new version once the step ends, although nothing counted moved after it."""
    fleet = await _fleet(tmp_path)
    sid = await fleet.spawn_ready()
    fleet.set_status(sid, AgentStatus.WORKING)  # not at its prompt: the send waits in its queue
    await fleet.ok("fleet_send", target=sid, prompt="go")
    fleet.set_status(sid, AgentStatus.IDLE)
    gate = hold_calls(fleet.control, "read")
    fleet.clock.advance(0.25)
    step = asyncio.ensure_future(fleet.service.scheduler.run_once("status-poller"))
    await asyncio.wait_for(gate.entered.wait(), 5)  # delivered; the baseline read is held
    during = await _listed(fleet)
    assert during["members"][0]["openTurn"]["baseline"] is None
    gate.release()
    await step
    after = await _listed(fleet)
    assert after["viewVersion"] > during["viewVersion"]
    assert after["members"][0]["openTurn"]["baseline"] is not None


async def test_what_lives_beside_the_bridge_moves_the_version(tmp_path: Path) -> None:
    """Records held for an unreachable inbox, teardown failures and health ticks are changes."""
    fleet = await _fleet(tmp_path, health=True)
    views = fleet.service.views
    version = views.version()
    await fleet.service.health.tick()
    assert views.version() > version
    version = views.version()
    await fleet.inbox.close()  # unreachable: the record waits in memory
    await fleet.bridge.outbox.keep(
        InboxRecord(
            kind=MessageKind.REPLY,
            msg_id="r-1",
            target="x",
            recipient_lead="lead",
            content="c",
            created_at_epoch_millis=1,
        )
    )
    assert views.version() > version
    version = views.version()
    fleet.bridge._note_failure("manifest:s-1")
    assert views.version() > version
    assert (await _listed(fleet))["teardownFailures"] == ["manifest:s-1"]


async def test_a_broker_in_steady_use_leaves_the_version_alone(tmp_path: Path) -> None:
    """Each answered call moves an endpoint's count, latency and last answer time; none of them
    moves the version (an idle fleet's long-polls and ETags rest). A failure does, and the
    counts shown are those of the newest version."""
    inbox = Brokered()
    fleet = await _fleet(tmp_path, inbox=inbox)
    views = fleet.service.views
    inbox.called(0, Outcome(latency=timedelta(milliseconds=1)), fleet)  # reachable: a change
    version = views.version()
    for n in range(20):
        fleet.clock.advance(0.1)
        inbox.called(0, Outcome(latency=timedelta(milliseconds=2 + n)), fleet)
    assert views.version() == version
    inbox.called(1, Outcome(error=ErrorClass.REFUSED), fleet)
    assert views.version() > version
    shown = (await _listed(fleet))["dependencies"]["inbox"]["endpoints"]
    assert [(e["calls"], e["failures"]) for e in shown] == [(21, 0), (1, 1)]


async def test_a_long_poll_waits_for_the_next_version(tmp_path: Path) -> None:
    """wait_past returns at once for another version, waits for a change, gives up after its
    time, and lets go at once when fleetd is asked to stop."""
    fleet = await _fleet(tmp_path)
    views = fleet.service.views
    now = views.version()
    assert await views.wait_past(now + 7, 30) == now  # a version of another run: no wait
    waiting = asyncio.ensure_future(views.wait_past(now, 30))
    await asyncio.sleep(0)
    assert not waiting.done()
    await fleet.spawn_ready()  # tool calls settle: the waiter learns of the change
    assert await waiting > now
    quiet = views.version()
    timed = asyncio.ensure_future(views.wait_past(quiet, 30))
    await fleet.clock.run(31, step=1)
    assert await timed == quiet
    stopping = asyncio.ensure_future(views.wait_past(quiet, 30))
    await asyncio.sleep(0)
    fleet.bridge.stopping.set()
    assert await stopping == quiet
    assert await views.wait_past(quiet, 30) == quiet  # stopping: no wait at all


async def test_a_long_poll_on_a_busy_fleet_is_answered_at_most_every_spacing(
    tmp_path: Path,
) -> None:
    """A waiter holding the version just built is not let go before the spacing: changes in a
    busy fleet do not make fleetd rebuild for every one of them."""
    fleet = await _fleet(tmp_path)
    views = fleet.service.views
    held = (await _listed(fleet))["viewVersion"]  # built now
    waiting = asyncio.ensure_future(views.wait_past(held, 30))
    await fleet.spawn_ready()  # the version moves at once...
    for _ in range(20):
        await asyncio.sleep(0)
    assert not waiting.done()  # ...but the waiter's view was built a moment ago
    await fleet.clock.run(LONG_POLL_SPACING_SECONDS, step=0.05)
    assert await asyncio.wait_for(waiting, 5) > held
