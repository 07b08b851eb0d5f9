"""events.subscribe through the client: ack, both event styles, reconnect with re-snapshot."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from fleetd.errors import ControlLinkError, TargetNotFoundError
from fleetd.herdr.model import AgentStatus
from fleetd.sim.events import AgentStatusChanged, Event, HerdrEvent, Subscription
from fleetd.sim.harness import SimHarness
from fleetd.sim.scenario import parse_scenario
from fleetd.sim.server import HerdrSimulator

SCENARIO = parse_scenario(
    {
        "defaults": {"turn_seconds": 1.0},
        "existing": [{"name": "lead", "kind": "claude"}, {"name": "m1", "kind": "codex"}],
    }
)


@contextlib.asynccontextmanager
async def collecting(
    h: SimHarness, subscriptions: list[Subscription], **kwargs: object
) -> AsyncIterator[tuple[list[Event], asyncio.Task[None]]]:
    events: list[Event] = []

    async def consume() -> None:
        async for event in h.client.events_subscribe(subscriptions, **kwargs):  # type: ignore[arg-type]
            events.append(event)

    task = asyncio.ensure_future(consume())
    try:
        yield events, task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


async def test_lifecycle_subscription_replays_history_then_follows() -> None:
    """A global kind first replays retained events, then pushes new ones (snake_case names)."""
    async with (
        SimHarness(SCENARIO) as h,
        collecting(h, [Subscription.lifecycle("pane.created")]) as (
            events,
            _,
        ),
    ):
        await h.advance(0.5)
        assert [e.pane_id for e in events if isinstance(e, HerdrEvent)] == ["w1:p1", "w2:p1"]
        await h.run(h.client.workspace_create(cwd="/x"))
        await h.advance(0.3)
        assert isinstance(events[-1], HerdrEvent)
        assert events[-1].kind == "pane_created"
        assert events[-1].pane_id == "w3:p1"


async def test_status_subscription_pushes_dotted_events_with_transients() -> None:
    """pane.agent_status_changed follows one pane, including a sub-poll `working`."""
    async with (
        SimHarness(SCENARIO) as h,
        collecting(h, [Subscription.status_changes("w2:p1")]) as (events, _),
    ):
        await h.advance(0.2)
        await h.run(h.client.agent_prompt("m1", "go"))
        await h.advance(2.0)
        statuses = [e.agent_status for e in events if isinstance(e, AgentStatusChanged)]
        assert statuses == [AgentStatus.WORKING, AgentStatus.DONE]
        assert all(e.pane_id == "w2:p1" for e in events if isinstance(e, AgentStatusChanged))


async def test_status_filter_sends_initial_event_when_already_matching() -> None:
    """With an agent_status filter that already matches, one initial event is sent."""
    async with (
        SimHarness(SCENARIO) as h,
        collecting(h, [Subscription.status_changes("w1:p1", AgentStatus.IDLE)]) as (events, _),
    ):
        await h.advance(0.3)
        assert len(events) == 1
        assert isinstance(events[0], AgentStatusChanged)
        assert events[0].agent_status is AgentStatus.IDLE


async def test_subscription_to_missing_pane_is_raised_not_retried() -> None:
    """A probe failure (pane_not_found, derived id) ends the iterator with TargetNotFoundError."""
    async with SimHarness(SCENARIO) as h:
        stream = h.client.events_subscribe([Subscription.status_changes("w9:p9")])
        with pytest.raises(TargetNotFoundError):
            await h.run(anext(stream))


async def test_stream_reconnects_and_runs_the_resnapshot_hook() -> None:
    """When herdr goes away and comes back, the stream reconnects and calls on_reconnect."""
    resnapshots: list[int] = []
    async with SimHarness(SCENARIO) as h:

        async def resnapshot() -> None:
            snap = await h.client.session_snapshot()
            resnapshots.append(len(snap.agents))

        async with collecting(
            h, [Subscription.lifecycle("workspace.created")], on_reconnect=resnapshot
        ) as (events, task):
            await h.advance(0.5)
            assert len(events) == 2
            await h.sim.stop()
            await h.advance(1.0)
            assert not task.done()
            second = HerdrSimulator(h.socket_path, SCENARIO, clock=h.clock)
            await second.start()
            try:
                await h.advance(15.0)
                assert resnapshots == [2]
                assert len(events) == 4
                await h.run(h.client.workspace_create())
                await h.advance(0.5)
                assert len(events) == 5
            finally:
                await second.stop()


async def test_stream_gives_up_after_max_attempts() -> None:
    """With max_attempts, consecutive failed reconnects end in ControlLinkError."""
    async with SimHarness(SCENARIO) as h:
        stream = h.client.events_subscribe([Subscription.lifecycle("pane.closed")], max_attempts=3)
        await h.sim.stop()
        with pytest.raises(ControlLinkError) as info:
            await h.run(anext(stream), max_seconds=120)
        assert info.value.code == "subscription_lost"


async def test_each_successful_resubscription_resets_the_attempt_budget() -> None:
    """Outages of one failed attempt each never add up against max_attempts=1 (quiet stream)."""
    quiet = [Subscription.lifecycle("pane.exited")]
    async with SimHarness(SCENARIO) as h, collecting(h, quiet, max_attempts=1) as (events, task):
        await h.advance(0.5)
        for _ in range(3):
            await h.sim.stop()
            await h.advance(0)
            h.sim = HerdrSimulator(h.socket_path, SCENARIO, clock=h.clock)
            await h.sim.start()
            await h.advance(5.0)
            assert not task.done()
        assert events == []
