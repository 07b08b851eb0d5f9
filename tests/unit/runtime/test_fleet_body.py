"""GET /v1/fleet's body from kept rows: byte for byte the tool's document, scoped, bounded."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetd.api.app import create_app
from fleetd.api.tools import Caller, Role, ToolResult
from fleetd.bridge import roster as roster_module
from fleetd.herdr.model import AgentStatus
from fleetd.testing import OPERATOR_TOKEN, TestFleet, build_test_fleet, sample_document

LEAD = Caller(role=Role.LEAD, name="lead")
LEAD_B = Caller(role=Role.LEAD, name="lead-b")
OPERATOR = Caller(role=Role.OPERATOR, name="operator")
CALLERS = (OPERATOR, LEAD, LEAD_B)
STATUSES = (AgentStatus.IDLE, AgentStatus.WORKING, AgentStatus.BLOCKED, AgentStatus.DONE)


async def _fleet(root: Path) -> TestFleet:
    document = sample_document(root)
    document["health"] = {"enabled": True}
    fleet = build_test_fleet(root, document=document)
    await fleet.service.own_lead_keys()
    await fleet.service.observe_herdr()
    return fleet


async def _expected(fleet: TestFleet, caller: Caller, version: int) -> bytes:
    """The document cut afresh from facts read for this version (every member row built
    again), encoded as the wire encodes it."""
    builder = fleet.service.view
    view = builder.scoped(await builder.facts(version), caller)
    document = ToolResult.success(view).to_json()
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()


async def _same_bodies(fleet: TestFleet) -> None:
    """Each scope's body of a new version (read at the fake clock's now, as the afresh build
    is) is the afresh build's bytes, and the tool answers that same document."""
    fleet.service.views.touched()
    for caller in CALLERS:
        encoded = await fleet.service.views.encoded(caller)
        assert encoded.body == await _expected(fleet, caller, encoded.version), caller
        tool = await fleet.call("fleet_list", caller)  # the tool answers the same document
        assert json.dumps(tool.to_json(), ensure_ascii=False, separators=(",", ":")).encode() == (
            encoded.body
        ), caller


def _row(body: bytes, session_id: str) -> dict[str, Any]:
    """The member row of ``session_id`` in a ``GET /v1/fleet`` body."""
    members: list[dict[str, Any]] = json.loads(body)["result"]["members"]
    return next(m for m in members if m["sessionId"] == session_id)


async def _read_once(tmp_path: Path) -> tuple[TestFleet, list[str]]:
    """A fleet of three ready members whose view was read once (every row built)."""
    fleet = await _fleet(tmp_path)
    sids = [await fleet.spawn_ready("codex") for _ in range(3)]
    await fleet.service.views.encoded(OPERATOR)
    return fleet, sids


def _members(fleet: TestFleet) -> list[str]:
    return sorted(s.session_id for s in fleet.bridge.reads.sessions())


async def _step(fleet: TestFleet, op: str, pick: int, seconds: float) -> None:
    """One change of the kind a busy fleet makes; a step that does not apply does nothing."""
    members = [sid for sid in _members(fleet) if fleet.bridge.reads.session(sid) is not None]
    live = [sid for sid in members if fleet.bridge.reads.session(sid).live]  # type: ignore[union-attr]
    sid = live[pick % len(live)] if live else None
    owner = LEAD if pick % 2 == 0 else LEAD_B
    if op == "spawn":
        row = await fleet.call("fleet_spawn", owner, profile=("codex", "opencode")[pick % 2])
        if row.ok and row.result is not None and pick % 3:
            await fleet.service.registry.contact(fleet.member(row.result["sessionId"]))
    elif op == "send" and sid is not None:
        session = fleet.bridge.reads.session(sid)
        assert session is not None
        await fleet.call(
            "fleet_send",
            Caller(role=Role.LEAD, name=session.owner),
            target=sid,
            prompt=f"task {pick}",
        )
    elif op == "reply" and sid is not None:
        await fleet.call("fleet_reply", fleet.member(sid), content=f"done {pick}")
    elif op == "collect":
        await fleet.call("fleet_poll", owner)
    elif op == "status" and sid is not None:
        fleet.set_status(sid, STATUSES[pick % len(STATUSES)])
        await fleet.poll(seconds)
    elif op == "tick":
        fleet.clock.advance(seconds)
        await fleet.service.push.push_once()
        await fleet.service.health.tick()
    elif op == "list":  # past the age at which herdr's agents are listed again
        fleet.clock.advance(60 + seconds)
        await fleet.service.observe_herdr()
    elif op == "stop" and sid is not None:
        session = fleet.bridge.reads.session(sid)
        assert session is not None
        await fleet.call("fleet_stop", Caller(role=Role.LEAD, name=session.owner), sessionId=sid)
    elif op == "wait":
        fleet.clock.advance(seconds)


OPS = st.sampled_from(
    ("spawn", "send", "reply", "collect", "status", "tick", "list", "stop", "wait")
)
STEPS = st.lists(
    st.tuples(OPS, st.integers(0, 50), st.floats(0.001, 90, allow_nan=False)),
    min_size=1,
    max_size=25,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=STEPS)
def test_a_body_from_kept_rows_is_the_body_built_afresh(
    steps: list[tuple[str, int, float]],
) -> None:
    """Whatever a fleet goes through (spawns, sends, replies, herdr statuses, health ticks,
    stops, time passing), each scope's body assembled from kept rows is byte for byte the tool's
    document for the same version, encoded afresh."""

    async def run() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            fleet = await _fleet(Path(tmp))
            await _same_bodies(fleet)
            for op, pick, seconds in steps:
                await _step(fleet, op, pick, seconds)
                await _same_bodies(fleet)

    asyncio.run(run())


async def test_only_the_rows_that_changed_are_encoded_again(tmp_path: Path) -> None:
    """Of five members, a send to one encodes that one's row again, not the others'; an unchanged
    fleet whose clock moved encodes none, only its ages move."""
    fleet = await _fleet(tmp_path)
    sids = [await fleet.spawn_ready("codex") for _ in range(5)]
    views = fleet.service.views
    first = json.loads((await views.encoded(OPERATOR)).body)["result"]
    built = views.bodies.members.built
    await fleet.ok("fleet_send", target=sids[2], prompt="go")
    await views.encoded(OPERATOR)
    assert views.bodies.members.built == built + 1
    fleet.clock.advance(7)
    fleet.service.views.touched()
    later = json.loads((await views.encoded(OPERATOR)).body)["result"]
    assert views.bodies.members.built == built + 1
    ages = {m["sessionId"]: m["stateAgeSeconds"] for m in first["members"]}
    assert later["members"][0]["stateAgeSeconds"] == ages[sids[0]] + 7
    await _same_bodies(fleet)


async def test_each_lead_gets_its_own_rows_from_one_cache(tmp_path: Path) -> None:
    """Rows are kept per member, not per caller: a lead's body holds its own members and the
    herdr agents it may see, the operator's all of them."""
    fleet = await _fleet(tmp_path)
    own = [await fleet.spawn_ready("codex") for _ in range(2)]
    other = (await fleet.ok("fleet_spawn", LEAD_B, profile="codex"))["sessionId"]
    fleet.clock.advance(60)
    await fleet.service.observe_herdr()
    views = fleet.service.views

    def shown(body: bytes) -> tuple[set[str], set[str]]:
        result: dict[str, Any] = json.loads(body)["result"]
        return {m["sessionId"] for m in result["members"]}, {a["name"] for a in result["agents"]}

    names = {sid: fleet.bridge.reads.session(sid).name for sid in (*own, other)}  # type: ignore[union-attr]
    lead_members, lead_agents = shown((await views.encoded(LEAD)).body)
    assert lead_members == set(own)
    assert lead_agents == {names[own[0]], names[own[1]], "lead", "lead-b"}
    b_members, b_agents = shown((await views.encoded(LEAD_B)).body)
    assert (b_members, b_agents) == ({other}, {names[other], "lead", "lead-b"})
    all_members, _ = shown((await views.encoded(OPERATOR)).body)
    assert all_members == {*own, other}
    assert len(views.bodies.members) == 3
    await _same_bodies(fleet)


async def test_rows_of_members_the_roster_forgot_are_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What is kept is bounded by the roster: once a released member is forgotten (here the
    roster keeps one released row), its row goes with the next version; herdr's agents no
    longer listed go too."""
    monkeypatch.setattr(roster_module, "_RELEASED_KEPT", 1)
    fleet = await _fleet(tmp_path)
    sids = [await fleet.spawn_ready("codex") for _ in range(4)]
    views = fleet.service.views
    fleet.clock.advance(60)
    await fleet.service.observe_herdr()
    await views.encoded(OPERATOR)
    assert len(views.bodies.members) == 4
    agents = len(views.bodies.agents)
    await fleet.ok("fleet_stop", sessionId=sids[0])
    await fleet.ok("fleet_stop", sessionId=sids[1])  # the first released row is forgotten
    assert sids[0] not in {s.session_id for s in fleet.bridge.reads.sessions()}
    fleet.clock.advance(60)
    await fleet.service.observe_herdr()
    await views.encoded(OPERATOR)
    assert len(views.bodies.members) == len(fleet.bridge.reads.sessions()) == 3
    assert len(views.bodies.agents) == agents - 2
    await _same_bodies(fleet)


async def test_get_answers_the_kept_bytes_and_long_polls_as_before(tmp_path: Path) -> None:
    """GET /v1/fleet sends the encoded body as is (the tool's document, encoded) with its ETag;
    a long-poll on the version is answered by the next change with the next version's body."""
    fleet = await _fleet(tmp_path)
    await fleet.spawn_ready("codex")
    transport = httpx.ASGITransport(app=create_app(fleet.service))
    auth = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://fleetd") as client:
        first = await client.get("/v1/fleet", headers=auth)
        version = first.json()["result"]["viewVersion"]
        assert first.content == await _expected(fleet, OPERATOR, version)
        waiting = asyncio.ensure_future(
            client.get("/v1/fleet", headers=auth, params={"sinceVersion": version, "wait": 30})
        )
        await asyncio.sleep(0)
        await fleet.spawn_ready("opencode")
        fleet.clock.advance(1)  # past the long-poll's spacing after the last build
        answered = await waiting
    assert answered.json()["result"]["viewVersion"] > version
    assert len(answered.json()["result"]["members"]) == 2
    assert answered.content == await _expected(
        fleet, OPERATOR, answered.json()["result"]["viewVersion"]
    )


async def test_a_moved_herdr_agent_is_the_only_agent_row_encoded_again(tmp_path: Path) -> None:
    """A herdr status change of one member encodes that agent's row again and no other; the body
    is still the tool's document built afresh."""
    fleet = await _fleet(tmp_path)
    sids = [await fleet.spawn_ready("codex") for _ in range(9)]
    await fleet.ok("fleet_send", target=sids[4], prompt="go")  # the poller reads it now
    fleet.clock.advance(60)
    await fleet.service.observe_herdr()
    views = fleet.service.views
    assert len(json.loads((await views.encoded(OPERATOR)).body)["result"]["agents"]) >= 9
    built = views.bodies.agents.built
    fleet.set_status(sids[4], AgentStatus.BLOCKED)
    await fleet.poll()
    views.touched()
    body = json.loads((await views.encoded(OPERATOR)).body)["result"]
    assert views.bodies.agents.built == built + 1
    name = fleet.bridge.reads.session(sids[4]).name  # type: ignore[union-attr]
    assert [a["status"] for a in body["agents"] if a["name"] == name] == ["blocked"]
    await _same_bodies(fleet)


async def test_capacity_is_kept_only_while_every_live_view_is_the_same(tmp_path: Path) -> None:
    """The capacity rows of the last version are handed out again while no live member's view
    moved (a herdr status alone), and made again when one did (a send takes a reclaimable slot)."""
    fleet = await _fleet(tmp_path)
    sids = [await fleet.spawn_ready("codex") for _ in range(3)]
    builder = fleet.service.view

    def reclaimable(rows: list[Any]) -> int:
        return sum(row.reclaimable for row in rows if row.profile == "codex")

    first = (await builder.facts(1)).capacity
    assert reclaimable(first) == 3
    fleet.set_status(sids[0], AgentStatus.WORKING)
    await fleet.poll()
    assert (await builder.facts(2)).capacity is first
    await fleet.ok("fleet_send", target=sids[1], prompt="go")
    moved = (await builder.facts(3)).capacity
    assert reclaimable(moved) == 2
    assert moved == builder.bridge.view.capacity_view(now=fleet.clock.now())


@pytest.mark.parametrize(
    "statuses",
    [
        pytest.param((AgentStatus.WORKING, AgentStatus.BLOCKED), id="working then blocked"),
        pytest.param((AgentStatus.IDLE, AgentStatus.UNKNOWN), id="idle then unknown"),
    ],
)
async def test_a_status_the_poller_read_moves_that_members_row_only(
    tmp_path: Path, statuses: tuple[AgentStatus, AgentStatus]
) -> None:
    """The poller's last status of a busy member is in its row: a new one is that row encoded
    again (whether or not its turn moved), and the body is the one built afresh."""
    fleet = await _fleet(tmp_path)
    sids = [await fleet.spawn_ready("codex") for _ in range(3)]
    await fleet.ok("fleet_send", target=sids[1], prompt="go")
    views = fleet.service.views
    await views.encoded(OPERATOR)
    for status in statuses:
        fleet.set_status(sids[1], status)
        await fleet.poll(0.3)
        built = views.bodies.members.built
        views.touched()
        encoded = await views.encoded(OPERATOR)
        assert encoded.body == await _expected(fleet, OPERATOR, encoded.version)
        row = _row(encoded.body, sids[1])
        assert row["liveStatus"] == status.value
        assert views.bodies.members.built <= built + 1


async def test_a_member_that_moves_while_a_version_is_read_is_read_again_next_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A member that moves after the sessions of a version were read (the read awaits the inbox
    and the manifests) keeps its mark: the next version encodes its row again."""
    fleet, sids = await _read_once(tmp_path)
    views = fleet.service.views
    kind = type(fleet.service.view)
    original = kind.read

    async def moved_meanwhile(self: Any, version: int, *, rows: bool) -> Any:
        read = await original(self, version, rows=rows)
        fleet.bridge.roster.update(sids[2], pane_id="w9:p9")  # after its session was read
        return read

    monkeypatch.setattr(kind, "read", moved_meanwhile)
    views.touched()
    await views.encoded(OPERATOR)
    monkeypatch.setattr(kind, "read", original)
    views.touched()
    encoded = await views.encoded(OPERATOR)
    assert encoded.body == await _expected(fleet, OPERATOR, encoded.version)
    row = _row(encoded.body, sids[2])
    assert row["paneId"] == "w9:p9"


async def test_callers_waiting_for_one_build_share_its_body(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ten requests that arrive while a version is being built wait for that build, and the body
    of their scope is then assembled once for all of them, not once each."""
    fleet = await _fleet(tmp_path)
    await fleet.spawn_ready("codex")
    views = fleet.service.views
    bodies = views.bodies
    assembled: list[Caller] = []
    original = bodies.body

    def counted(encoded: Any, caller: Caller) -> bytes:
        assembled.append(caller)
        return original(encoded, caller)

    monkeypatch.setattr(bodies, "body", counted)
    views.touched()
    answers = await asyncio.gather(*(views.encoded(OPERATOR) for _ in range(10)))
    assert len({answer.body for answer in answers}) == 1
    assert assembled == [OPERATOR]


async def test_a_turn_the_poller_saw_working_moves_the_bridge_s_revision(tmp_path: Path) -> None:
    """The poller seeing a typed turn working changes what the member's row shows
    (``openTurn.sawWorking``, its ``liveStatus``): the bridge's revision, which the fleet view's
    version follows, moves with it, whether or not herdr's own list moved too (it used to wait
    for some other change, and the row showed ``sawWorking: false`` meanwhile)."""
    fleet = await _fleet(tmp_path)
    sids = [await fleet.spawn_ready("codex") for _ in range(2)]
    await fleet.ok("fleet_send", target=sids[0], prompt="go")
    views = fleet.service.views
    fleet.set_status(sids[0], AgentStatus.WORKING)
    before = await views.encoded(OPERATOR)
    row = _row(before.body, sids[0])
    assert row["openTurn"]["sawWorking"] is False
    revision = fleet.bridge.reads.revision
    await fleet.poll()
    assert fleet.bridge.reads.revision > revision
    encoded = await views.encoded(OPERATOR)
    assert encoded.version > before.version
    row = _row(encoded.body, sids[0])
    assert (row["openTurn"]["sawWorking"], row["liveStatus"]) == (True, "working")


async def test_two_builds_that_overlap_keep_the_rows_of_the_later_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build still reading when the view moves again does not let the next build overtake it:
    reads run one after the other, so the rows kept are those of the later reading (two reads
    that ended out of order kept the older member's row for good)."""
    fleet, sids = await _read_once(tmp_path)
    views = fleet.service.views
    kind = type(fleet.service.view)
    original = kind.read
    entered, gate, held = asyncio.Event(), asyncio.Event(), [True]

    async def first_read_held(self: Any, version: int, *, rows: bool) -> Any:
        read = await original(self, version, rows=rows)
        if held[0]:  # the first build has read its sessions and waits
            held[0] = False
            entered.set()
            await gate.wait()
        return read

    monkeypatch.setattr(kind, "read", first_read_held)
    fleet.bridge.roster.update(sids[1], pane_id="w1:p1")
    views.touched()
    first = asyncio.ensure_future(views.encoded(OPERATOR))
    await entered.wait()
    fleet.bridge.roster.update(sids[1], pane_id="w2:p2")
    views.touched()
    second = asyncio.ensure_future(views.encoded(OPERATOR))
    # given the time to overtake the first (the read hands the manifests to a thread), it waits
    await asyncio.wait({second}, timeout=0.2)
    gate.set()
    await asyncio.gather(first, second)
    monkeypatch.setattr(kind, "read", original)
    views.touched()
    encoded = await views.encoded(OPERATOR)  # the harness checks every kept row, too
    row = _row(encoded.body, sids[1])
    assert row["paneId"] == "w2:p2"
    assert encoded.body == await _expected(fleet, OPERATOR, encoded.version)
