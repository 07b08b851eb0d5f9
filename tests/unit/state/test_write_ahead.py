"""The bridge writes what a restart needs to its state store before the effect it causes, and a
fleet restarted on that store takes it back (the bridge on fakes, the in-memory store)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from fleetd.errors import HerdrError
from fleetd.herdr.model import AgentInfo, AgentStatus
from fleetd.state.facts import DeliveryState
from fleetd.state.memory import MemoryStateStore
from fleetd.testing import TestFleet, build_test_fleet


@pytest.fixture
def store() -> MemoryStateStore:
    return MemoryStateStore()


@pytest.fixture
async def fleet(tmp_path: Path, store: MemoryStateStore) -> TestFleet:
    built = build_test_fleet(tmp_path, state=store)
    await built.service.own_lead_keys()
    return built


async def _restart(tmp_path: Path, first: TestFleet, store: MemoryStateStore) -> TestFleet:
    second = build_test_fleet(
        tmp_path, control=first.control, state=store, worktrees=first.worktrees
    )
    await second.service.restore()
    await second.service.own_lead_keys()
    await second.bridge.confirm_restored()
    return second


async def test_a_member_is_stored_with_its_token_hash_never_the_token(
    fleet: TestFleet, store: MemoryStateStore
) -> None:
    """A spawned member's record holds the SHA-256 of its token; the token is nowhere stored."""
    sid = await fleet.spawn_ready()
    session = fleet.bridge.reads.session(sid)
    assert session is not None
    assert session.pane_id is not None
    token = fleet.control.env_of(session.pane_id)["FLEETD_TOKEN"]
    record = store.members[sid]
    assert record.token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert record.presence is True
    assert token not in repr(store.load())


async def test_a_prompt_is_stored_uncertain_before_it_is_typed_and_typed_after(
    fleet: TestFleet, store: MemoryStateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fleet_send stores the prompt before it answers; when herdr is asked to type it the store
    already says uncertain, without the prompt, with the turn it opens; herdr's ok makes it
    typed."""
    sid = await fleet.spawn_ready()
    seen: list[tuple[DeliveryState, str | None, bool]] = []
    prompt = fleet.control.prompt

    async def watched(target: str, text: str) -> AgentInfo:
        [record] = store.tickets.values()
        seen.append((record.delivery, record.prompt, sid in store.turns))
        return await prompt(target, text)

    monkeypatch.setattr(fleet.control, "prompt", watched)
    fleet.set_status(sid, AgentStatus.WORKING)  # not at its prompt: the send waits, stored
    ticket = (await fleet.ok("fleet_send", target=sid, prompt="the task"))["ticket"]
    assert (store.tickets[ticket].delivery, store.tickets[ticket].prompt) == (
        DeliveryState.QUEUED,
        "the task",
    )
    fleet.set_status(sid, AgentStatus.IDLE)
    await fleet.poll()
    assert seen == [(DeliveryState.UNCERTAIN, None, True)]
    stored = store.tickets[ticket]
    assert (stored.delivery, stored.prompt, stored.turn) == (DeliveryState.TYPED, None, 1)
    assert store.turns[sid].ticket_id == ticket
    assert store.members[sid].turn == 1


async def test_a_send_typed_at_once_is_stored_by_one_write_ahead_of_its_prompt(
    fleet: TestFleet, store: MemoryStateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A send to a member at its prompt is typed before fleet_send answers: one write stores it,
    uncertain with its turn, before herdr is asked to type it (not a queued write, then another);
    herdr's ok is the next write."""
    sid = await fleet.spawn_ready()
    before = store.writes
    seen: list[tuple[int, DeliveryState]] = []
    prompt = fleet.control.prompt

    async def watched(target: str, text: str) -> AgentInfo:
        [record] = store.tickets.values()
        seen.append((store.writes - before, record.delivery))
        return await prompt(target, text)

    monkeypatch.setattr(fleet.control, "prompt", watched)
    ticket = (await fleet.ok("fleet_send", target=sid, prompt="at once"))["ticket"]
    assert seen == [(1, DeliveryState.UNCERTAIN)]
    assert store.tickets[ticket].delivery is DeliveryState.TYPED
    assert store.writes - before == 2


async def test_a_send_the_store_refuses_at_its_prompt_is_not_accepted_nor_queued(
    fleet: TestFleet, store: MemoryStateStore
) -> None:
    """A ready member, a store failing: the write ahead of the prompt is refused, so nothing is
    typed, the send is not accepted, and no queued send is left behind for a later poll."""
    sid = await fleet.spawn_ready()
    store.fail = True
    result = await fleet.call("fleet_send", target=sid, prompt="not typed")
    assert result.error is not None
    assert result.error.code == "unavailable"
    store.fail = False
    await fleet.poll()
    assert fleet.control.calls_to("prompt") == []
    assert fleet.bridge.reads.pending_for(sid) == []
    assert store.tickets == {}


async def test_a_refused_prompt_is_queued_again_with_its_prompt(
    fleet: TestFleet, store: MemoryStateStore
) -> None:
    """herdr refused before typing: the store holds the ticket queued with its prompt, no turn."""
    sid = await fleet.spawn_ready()
    fleet.control.fail("prompt", HerdrError("agent_blocked", "blocked"))
    ticket = (await fleet.ok("fleet_send", target=sid, prompt="again"))["ticket"]
    stored = store.tickets[ticket]
    assert (stored.delivery, stored.prompt, stored.refusals) == (DeliveryState.QUEUED, "again", 1)
    assert sid not in store.turns
    assert store.members[sid].turn == 0


async def test_a_send_the_store_cannot_record_is_not_accepted(
    fleet: TestFleet, store: MemoryStateStore
) -> None:
    """With the store failing, fleet_send answers unavailable and nothing is typed."""
    sid = await fleet.spawn_ready()
    store.fail = True
    result = await fleet.call("fleet_send", target=sid, prompt="lost?")
    assert not result.ok
    assert result.error is not None
    assert result.error.code == "unavailable"
    assert fleet.control.calls_to("prompt") == []
    assert fleet.bridge.reads.pending_for(sid) == []


async def test_an_ended_ticket_is_stored_and_a_release_drops_the_member(
    fleet: TestFleet, store: MemoryStateStore
) -> None:
    """A reply stores the ticket's outcome and closes the turn; fleet_stop drops the member."""
    sid = await fleet.spawn_ready()
    ticket = (await fleet.ok("fleet_send", target=sid, prompt="work"))["ticket"]
    await fleet.ok("fleet_reply", fleet.member(sid), content="answer")
    stored = store.tickets[ticket]
    assert (stored.outcome, stored.content, stored.source) == ("done", "answer", "reply")
    assert sid not in store.turns
    await fleet.ok("fleet_stop", sessionId=sid)
    assert sid not in store.members


async def test_a_restart_adopts_the_member_its_token_and_its_open_turn(
    tmp_path: Path, fleet: TestFleet, store: MemoryStateStore
) -> None:
    """After a restart on the same store the member is live and BUSY on its turn, its old token
    authenticates, its reply resolves the ticket of before the restart, and the queued send
    behind it is typed once, after it."""
    sid = await fleet.spawn_ready()
    first = (await fleet.ok("fleet_send", target=sid, prompt="one"))["ticket"]
    fleet.set_status(sid, AgentStatus.WORKING)
    queued = (await fleet.ok("fleet_send", target=sid, prompt="two"))["ticket"]
    member = fleet.member(sid)

    second = await _restart(tmp_path, fleet, store)
    status = await second.ok("fleet_status", sessionId=sid)
    assert (status["state"], status["queued"]) == ("busy", 1)
    assert second.member(sid) == member
    await second.ok("fleet_reply", second.member(sid), content="first answer")
    polled = await second.ok("fleet_poll", ticket=first)
    assert (polled["status"], polled["content"]) == ("done", "first answer")
    second.set_status(sid, AgentStatus.IDLE)
    await second.poll()
    assert [c.args["text"] for c in fleet.control.calls_to("prompt")] == ["one", "two"]
    assert (await second.ok("fleet_poll", ticket=queued))["status"] == "pending"


class _Died(BaseException):
    """The process ending where it is raised (no handler of fleetd's catches it)."""


def _dies_in(fleet: TestFleet, monkeypatch: pytest.MonkeyPatch, method: str, *, done: bool) -> None:
    """fleetd dies inside herdr's ``method`` — after herdr did it (``done``) or before — and
    nothing of fleetd runs after that (no rollback): as ``kill -9`` would leave it."""
    call = getattr(fleet.control, method)

    async def dies(**kwargs: Any) -> Any:
        if done:
            await call(**kwargs)
        raise _Died

    async def no_rollback(*_args: Any, **_kwargs: Any) -> Any:
        raise _Died

    monkeypatch.setattr(fleet.control, method, dies)
    monkeypatch.setattr(fleet.bridge.lifecycle, "release", no_rollback)


async def test_a_turn_stored_uncertain_is_never_typed_again(
    tmp_path: Path, fleet: TestFleet, store: MemoryStateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash between the uncertain write and herdr's answer: the restarted fleet holds the turn
    open as uncertain and types nothing; a boundary passes without a reply and the ticket stays
    pending (nothing is read from the pane for it)."""
    sid = await fleet.spawn_ready()

    async def crash(_target: str, _text: str) -> AgentInfo:
        raise _Died

    monkeypatch.setattr(fleet.control, "prompt", crash)
    with pytest.raises(_Died):  # fleetd "dies" inside the call: nothing after it runs
        await fleet.call("fleet_send", target=sid, prompt="once")
    [ticket] = store.tickets
    assert store.tickets[ticket].delivery is DeliveryState.UNCERTAIN
    monkeypatch.undo()

    second = await _restart(tmp_path, fleet, store)
    polled = await second.ok("fleet_poll", ticket=ticket)
    assert (polled["status"], polled["delivery"]) == ("pending", "uncertain")
    for status in (AgentStatus.WORKING, AgentStatus.IDLE):
        second.set_status(sid, status)
        for _ in range(12):
            await second.poll(0.5)
    assert fleet.control.calls_to("prompt") == []
    assert fleet.control.calls_to("read") == []
    assert (await second.ok("fleet_poll", ticket=ticket))["status"] == "pending"


async def test_a_stored_member_herdr_no_longer_lists_is_released_as_gone(
    tmp_path: Path, fleet: TestFleet, store: MemoryStateStore
) -> None:
    """The pane went while fleetd was down: at start the member is released as GONE, its pending
    ticket fails once and its record leaves the store."""
    sid = await fleet.spawn_ready()
    ticket = (await fleet.ok("fleet_send", target=sid, prompt="work"))["ticket"]
    session = fleet.bridge.reads.session(sid)
    assert session is not None
    fleet.control.remove(session.name)

    second = await _restart(tmp_path, fleet, store)
    polled = await second.ok("fleet_poll", ticket=ticket)
    assert polled["status"] == "failed"
    released = second.bridge.reads.session(sid)
    assert released is not None
    assert released.released_cause == "gone"
    assert sid not in store.members


@pytest.mark.parametrize("started", [True, False], ids=["after agent.start", "before agent.start"])
async def test_a_crash_in_a_spawn_after_the_pane_is_adopted_or_released_never_lost(
    tmp_path: Path,
    fleet: TestFleet,
    store: MemoryStateStore,
    monkeypatch: pytest.MonkeyPatch,
    started: bool,
) -> None:
    """fleetd dies inside fleet_spawn once the pane exists: stored ahead of agent.start, the
    member is a member again after the restart when herdr started it (its token works, the lead
    can send to it, never an orphan), and released as gone with its pane closed when herdr never
    started it (no shell left behind)."""
    _dies_in(fleet, monkeypatch, "start_agent", done=started)
    with pytest.raises(_Died):
        await fleet.call("fleet_spawn", profile="sonnet")
    [sid] = store.members
    pane = store.members[sid].pane_id
    monkeypatch.undo()

    second = await _restart(tmp_path, fleet, store)
    rows = {m["sessionId"]: m["state"] for m in (await second.ok("fleet_list"))["members"]}
    if started:
        assert rows[sid] not in ("orphaned", "released")
        await second.service.registry.contact(second.member(sid))
        ticket = (await second.ok("fleet_send", target=sid, prompt="after"))["ticket"]
        assert (await second.ok("fleet_poll", ticket=ticket))["status"] == "pending"
    else:
        assert rows[sid] == "released"
        assert pane in [c.args["pane_id"] for c in fleet.control.calls_to("close_pane")]
        assert sid not in store.members


@pytest.mark.parametrize("listed", [True, False], ids=["pane listed", "pane gone"])
async def test_a_release_a_crash_interrupted_is_finished_by_the_next_start(
    tmp_path: Path,
    fleet: TestFleet,
    store: MemoryStateStore,
    monkeypatch: pytest.MonkeyPatch,
    listed: bool,
) -> None:
    """fleetd dies inside fleet_stop, after the release was stored and before the pane closed:
    the next start never takes the member back live. It finishes the stop with the cause it was
    stored with — the pane closed (when herdr still lists it), the queued send failed once and
    never typed, sends refused meanwhile — and the member's record leaves the store."""
    sid = await fleet.spawn_ready()
    first = (await fleet.ok("fleet_send", target=sid, prompt="work"))["ticket"]
    fleet.set_status(sid, AgentStatus.WORKING)
    queued = (await fleet.ok("fleet_send", target=sid, prompt="never typed"))["ticket"]
    session = fleet.bridge.reads.session(sid)
    assert session is not None
    assert session.pane_id is not None
    pane = session.pane_id

    async def dies(_pane_id: str) -> None:
        raise _Died

    monkeypatch.setattr(fleet.control, "close_pane", dies)
    with pytest.raises(_Died):
        await fleet.call("fleet_stop", sessionId=sid)
    assert store.members[sid].releasing == "release_with_pending_tasks"
    monkeypatch.undo()
    if not listed:
        fleet.control.remove(session.name)

    second = build_test_fleet(tmp_path, control=fleet.control, state=store)
    await second.service.restore()
    await second.service.own_lead_keys()
    refused = await second.call("fleet_send", target=sid, prompt="after the stop")
    assert refused.error is not None
    assert refused.error.code == "conflict"
    await second.bridge.confirm_restored()
    released = second.bridge.reads.session(sid)
    assert released is not None
    assert (released.live, released.released_cause) == (False, "release_with_pending_tasks")
    # closed while herdr lists it under the member's label; a pane gone is not asked for again
    # (its id may be another's by now)
    closed = [c.args["pane_id"] for c in fleet.control.calls_to("close_pane")]
    assert (pane in closed) is listed
    assert session.name not in [agent.name for agent in await fleet.control.list_agents()]
    for ticket in (first, queued):
        assert (await second.ok("fleet_poll", ticket=ticket))["status"] == "failed"
    assert [c.args["text"] for c in fleet.control.calls_to("prompt")] == ["work"]
    assert sid not in store.members


@pytest.mark.parametrize("made", [True, False], ids=["herdr made the pane", "herdr made none"])
async def test_a_spawn_cut_short_before_its_pane_was_stored_is_rolled_back_at_start(
    tmp_path: Path,
    fleet: TestFleet,
    store: MemoryStateStore,
    monkeypatch: pytest.MonkeyPatch,
    made: bool,
) -> None:
    """fleetd dies inside herdr's ``workspace.create`` (before or after herdr made the pane):
    stored ahead of the create, the spawn is rolled back by the next start — the shell herdr made
    for it closed (a person's pane under the same label left alone), its worktree removed, its
    record dropped, and health told that the member never became ready, for its lead."""
    theirs = await fleet.control.create_pane(label="docs")
    _dies_in(fleet, monkeypatch, "create_pane", done=made)
    with pytest.raises(_Died):
        await fleet.call("fleet_spawn", profile="sonnet", name="docs")
    [sid] = store.members
    assert (store.members[sid].pane_id, store.members[sid].panes_before) == (None, theirs.pane_id)
    monkeypatch.undo()
    panes = {pane.pane_id for pane in await fleet.control.labelled_panes("docs")}
    ours = panes - {theirs.pane_id}
    assert len(ours) == (1 if made else 0)

    second = await _restart(tmp_path, fleet, store)
    released = second.bridge.reads.session(sid)
    assert released is not None
    assert (released.live, released.released_cause) == (False, "spawn_rollback")
    assert released.lost is not None
    assert (released.lost.cause.value, released.lost.code) == ("never_ready", "fleetd_restarted")
    closed = {c.args["pane_id"] for c in fleet.control.calls_to("close_pane")}
    assert closed == ours
    assert {p.pane_id for p in await fleet.control.labelled_panes("docs")} == {theirs.pane_id}
    assert len(fleet.worktrees.removed) == 1  # clean: a rolled-back spawn's worktree goes
    assert len(second.worktrees.removed) == 1
    assert sid not in store.members
