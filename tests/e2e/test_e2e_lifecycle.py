"""Lifecycle across a restart, end to end: a clean stop, a crash, and the run after it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fleetd.bridge.manifests import load_manifests
from fleetd.bridge.sessions import SessionState
from fleetd.sim.agent import SimAgent
from tests.e2e.e2e_fleet import LEAD_TOKEN, E2EFleet, start_e2e
from tests.metric_samples import sample

CAPPED = {"profiles": {"sonnet": {"kind": "claude", "maxLoad": 1}, "codex": {"kind": "codex"}}}


async def _ready_member(e2e: E2EFleet, client: Any, **spawn: Any) -> str:
    row = await e2e.tool(client, "fleet_spawn", profile=spawn.pop("profile", "sonnet"), **spawn)
    sid: str = row["sessionId"]

    def ready() -> bool:
        session = e2e.service.bridge.reads.session(sid)
        return session is not None and session.state is SessionState.READY

    await e2e.until(ready)
    return sid


def _agent(e2e: E2EFleet, name: str) -> SimAgent | None:
    return next((a for a in e2e.simulator.world.agents() if a.name == name), None)


async def _call(e2e: E2EFleet, token: str, tool: str, **args: Any) -> tuple[int, dict[str, Any]]:
    async with e2e.http(token) as client:
        response = await e2e.run(client.post(f"/v1/tools/{tool}", json=args))
    body: dict[str, Any] = response.json()
    return response.status_code, body


RELEASE_ON_STOP = {"bridge": {"releaseOnStop": True}}


async def test_clean_stop_releases_members_with_the_shutdown_cause(tmp_path: Path) -> None:
    """With bridge.releaseOnStop, SIGTERM's path stops each member, keeps its worktree, writes a
    SHUTDOWN manifest, and fails a pending ticket exactly once; the next run lists the worktrees
    and finds no orphan and no member to adopt."""
    async with start_e2e(tmp_path, RELEASE_ON_STOP) as e2e:
        async with e2e.http() as lead:
            busy = await _ready_member(e2e, lead, name="busy-1")
            idle = await _ready_member(e2e, lead, profile="codex", name="idle-1")
            ticket = (await e2e.tool(lead, "fleet_send", target=busy, prompt="long task"))["ticket"]
        bridge = e2e.service.bridge
        trees = {sid: bridge.reads.session(sid).worktree for sid in (busy, idle)}  # type: ignore[union-attr]
        await e2e.stop()  # at once: the turn is still running

        assert _agent(e2e, "busy-1") is None
        assert _agent(e2e, "idle-1") is None
        for tree in trees.values():
            assert tree is not None
            assert tree.path.is_dir()
        manifests = load_manifests(tmp_path / "wt").manifests
        assert {(m.session_id, m.cause.value) for m in manifests} == {
            (busy, "shutdown"),
            (idle, "shutdown"),
        }
        [busy_manifest] = [m for m in manifests if m.session_id == busy]
        assert busy_manifest.pending_task_ids == (ticket,)
        polled = bridge.reads.ticket(ticket)
        assert polled is not None
        assert (polled.outcome.value, polled.reason) == ("failed", "shutdown")
        assert sample(e2e.service.metrics.tickets_total, outcome="failed", source="none") == 1

        async with (
            start_e2e(tmp_path, RELEASE_ON_STOP, restart_of=e2e) as second,
            second.http() as lead,
        ):
            listed = await second.tool(lead, "fleet_list")
            assert listed["members"] == []
            assert {(p["sessionId"], p["cause"]) for p in listed["preservedWorktrees"]} == {
                (busy, "shutdown"),
                (idle, "shutdown"),
            }


async def test_after_a_crash_with_the_state_discarded_members_are_orphaned(tmp_path: Path) -> None:
    """A member of a crashed run whose state was discarded (``--discard-state``) is found at
    start by its mark, holds its maxLoad slot, shows as orphaned, and its lead stops it by pane
    id; its worktree is preserved and nothing is replayed."""
    async with start_e2e(tmp_path, CAPPED) as first:
        async with first.http() as lead:
            sid = await _ready_member(first, lead, name="worker-1")
            await first.tool(lead, "fleet_send", target=sid, prompt="long task")
        pane = first.service.bridge.reads.session(sid).pane_id  # type: ignore[union-attr]
        await first.crash()
        agent = _agent(first, "worker-1")
        assert agent is not None
        prompts = agent.turns

        async with (
            start_e2e(tmp_path, CAPPED, restart_of=first, discard_state=True) as second,
            second.http() as lead,
        ):
            listed = await second.tool(lead, "fleet_list")
            [row] = listed["members"]
            assert (row["sessionId"], row["state"], row["paneId"]) == (sid, "orphaned", pane)
            assert row["suggestedToolCalls"] == [f'fleet_stop(paneId="{pane}")']
            [sonnet] = [c for c in listed["capacity"] if c["profile"] == "sonnet"]
            assert (sonnet["live"], sonnet["free"], sonnet["orphaned"]) == (1, 0, 1)
            status, refused = await _call(second, LEAD_TOKEN, "fleet_spawn", profile="sonnet")
            assert (status, refused["error"]["code"]) == (409, "capacity_exceeded")
            status, refused = await _call(
                second, LEAD_TOKEN, "fleet_spawn", profile="codex", name="worker-1"
            )
            assert (status, refused["error"]["code"]) == (409, "conflict")

            await second.advance(10.0)  # the orphan's turn ends; its reply has nowhere to go
            assert agent.turns == prompts
            assert (await second.tool(lead, "fleet_poll"))["messages"] == []

            stopped = await second.tool(lead, "fleet_stop", paneId=pane)
            assert (stopped["sessionId"], stopped["cause"], stopped["worktree"]) == (
                sid,
                "lead_abort",
                "preserve",
            )
            assert _agent(second, "worker-1") is None
            listed = await second.tool(lead, "fleet_list")
            assert listed["members"] == []
            assert [(p["sessionId"], p["cause"]) for p in listed["preservedWorktrees"]] == [
                (sid, "lead_abort")
            ]
            await _ready_member(second, lead, name="worker-2")


async def test_tickets_and_tokens_of_a_discarded_run_say_fleetd_restarted(tmp_path: Path) -> None:
    """After a restart with ``--discard-state`` a lead's old ticket is unknown_ticket with a
    restart hint, and a member's old token is refused with a message that says the same, not a
    bare 401."""
    async with start_e2e(tmp_path) as first:
        async with first.http() as lead:
            sid = await _ready_member(first, lead, name="worker-1")
            ticket = (await first.tool(lead, "fleet_send", target=sid, prompt="long task"))[
                "ticket"
            ]
        agent = _agent(first, "worker-1")
        assert agent is not None
        old_token = agent.env["FLEETD_TOKEN"]
        await first.crash()

        async with start_e2e(tmp_path, restart_of=first, discard_state=True) as second:
            status, body = await _call(second, LEAD_TOKEN, "fleet_poll", ticket=ticket)
            assert status == 404
            error = body["error"]
            assert error["code"] == "unknown_ticket"
            assert "fleetd restarted" in error["message"]
            assert "results of that run are gone" in error["message"]
            assert "nothing was replayed" in error["message"]
            assert (error["hint"]["restarted"], error["hint"]["replayed"]) == (True, False)

            status, body = await _call(second, LEAD_TOKEN, "fleet_poll", ticket="t9-abcdef")
            assert (status, body["error"]["code"]) == (404, "unknown_ticket")
            assert "restarted" not in body["error"]["message"]

            status, body = await _call(second, old_token, "fleet_reply", content="late answer")
            assert (status, body["error"]["code"]) == (401, "unauthenticated")
            assert "fleetd restarted" in body["error"]["message"]
            assert "nothing was replayed" in body["error"]["message"]

            status, body = await _call(second, "r00000000.not-a-token", "fleet_reply", content="x")
            assert status == 401
            assert "restarted" not in body["error"]["message"]
