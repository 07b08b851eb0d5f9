"""Lost-boundary repair end to end: the simulator, fleetd, health and the lead, on the fake clock
(M4 Unit 2 criterion 21). Every test ends by checking criterion 20 over every herdr request."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from fleetd.bridge import RepairResult
from fleetd.bridge.sessions import SessionEvent, SessionState
from fleetd.screens import CLIPPED_TAIL_MARKER, REPAIRED_COMPLETION_MARKER
from tests.e2e.e2e_fleet import OPERATOR_TOKEN, start_e2e
from tests.e2e.repair_e2e import (
    AGENTS,
    HEALTH,
    OVERRIDES,
    SLOW_POLL,
    ReadHold,
    assert_nothing_replayed,
    lose_second_turn,
    member_state,
)
from tests.metric_samples import sample

NOTHING_REBUILT = "No reply was reconstructed and no task was replayed"


async def test_trace_one_busy_while_done_is_repaired_with_its_marker(tmp_path: Path) -> None:
    """Trace 1: turn 2 BUSY while herdr says done; two snapshots later the turn is repaired."""
    async with start_e2e(tmp_path, OVERRIDES, agents=AGENTS) as e2e, e2e.http() as lead:
        lost = await lose_second_turn(e2e, lead, "m-lost-1")
        await e2e.until(lambda: lost.repairs("repaired") == 1)
        polled = await lost.poll(lost.ticket)
        assert (polled["status"], polled["source"]) == ("done", "repaired")
        assert polled["content"] == f"{REPAIRED_COMPLETION_MARKER}\n\nFinished two."
        assert lost.session.state is SessionState.DONE
        assert lost.session.history[-1][1] is SessionEvent.TURN_RECONCILED
        inbox = (await e2e.tool(lead, "fleet_poll"))["messages"]
        [reply] = [m for m in inbox if m.get("ticket") == lost.ticket]
        assert reply["source"] == "repaired"
        assert reply["content"].startswith(REPAIRED_COMPLETION_MARKER)
        await e2e.until(lambda: member_state(e2e, lost.session_id) == "IDLE")
        assert not e2e.service.health.state.incidents
        escalation = e2e.service.health.escalation
        assert escalation is not None
        await e2e.until(lambda: escalation.owed == 0)  # the webhook loop recorded the resolution
        async with e2e.http(OPERATOR_TOKEN) as operator:  # issue 20 3c: the repair's trace
            journal = (await e2e.run(operator.get("/v1/incidents"))).json()["result"]
        [row] = [i for i in journal["incidents"] if i["state"] == "TURN_BOUNDARY_LOST"]
        assert (row["status"], row["resolveReason"]) == ("resolved", "repaired")
        assert_nothing_replayed(e2e)


async def test_trace_two_a_lost_turn_and_a_queued_send_when_the_pane_stops(
    tmp_path: Path,
) -> None:
    """Trace 2: two sends a second apart, the first turn's boundary lost, then the pane exits:
    both tickets fail once, the old turn is never repaired, the queued task never typed."""
    async with start_e2e(tmp_path, OVERRIDES, agents=AGENTS) as e2e, e2e.http() as lead:
        lost = await lose_second_turn(e2e, lead, "m-lost-2")
        token = lost.token
        await e2e.advance(1)
        queued = await e2e.tool(lead, "fleet_send", target=lost.session_id, prompt="three")
        e2e.simulator.agent("m-lost-2").exit()
        await e2e.until(lambda: lost.session.state is SessionState.RELEASED)
        for ticket in (lost.ticket, queued["ticket"]):
            polled = await lost.poll(ticket)
            assert polled["status"] == "failed"
        outcome = await e2e.run(
            e2e.service.bridge.repair.reconcile_lost_boundary(lost.session_id, token)
        )
        assert outcome.result is RepairResult.STALE_TURN
        assert lost.repairs("repaired") == 0
        assert sample(e2e.service.metrics.tickets_total, outcome="failed", source="none") == 2
        assert "three" not in [r["params"]["text"] for r in e2e.requests_to("agent.prompt")]
        assert_nothing_replayed(e2e)


async def test_refused_no_baseline_is_told_to_the_lead_and_never_retried(tmp_path: Path) -> None:
    """A first turn on a welcome screen has no recognised baseline: refused once, the ticket
    stays pending, the incident stays open, and the lead reads that nothing was rebuilt."""
    async with start_e2e(tmp_path, OVERRIDES, agents=AGENTS) as e2e, e2e.http() as lead:
        sid = (await e2e.tool(lead, "fleet_spawn", profile="sonnet", name="m-mute-9"))["sessionId"]
        bridge = e2e.service.bridge
        await e2e.until(lambda: bridge.reads.session(sid).state is SessionState.READY)  # type: ignore[union-attr]
        ticket = (await e2e.tool(lead, "fleet_send", target=sid, prompt="first"))["ticket"]
        await e2e.until(
            lambda: sample(e2e.service.metrics.repairs_total, result="refused_no_baseline") == 1
        )
        await e2e.advance(300)
        assert (
            sample(e2e.service.metrics.repairs_total, result="refused_no_baseline") == 1
        )  # no retry, ever
        assert (await e2e.tool(lead, "fleet_poll", ticket=ticket))["status"] == "pending"
        assert member_state(e2e, sid) == "TURN_BOUNDARY_LOST"
        [incident] = (await e2e.tool(lead, "fleet_list"))["incidents"]
        assert incident["repair"] == {
            "result": "refused_no_baseline",
            "detail": "baseline_unrecognised",
            "attempts": 1,
            "retry": "none",
            "replyReconstructed": False,
            "taskReplayed": False,
        }
        inbox = (await e2e.tool(lead, "fleet_poll"))["messages"]
        records = [m for m in inbox if m["kind"] == "health"]
        assert [r["evidence"].get("repair_result") for r in records] == [
            None,
            "refused_no_baseline",
        ]
        assert NOTHING_REBUILT in records[1]["content"]
        assert "first" not in records[1]["content"]
        assert_nothing_replayed(e2e)


async def test_refused_no_capture_while_the_baseline_read_is_still_out(tmp_path: Path) -> None:
    """A capture not yet taken when repair comes is no evidence: refused, never retried, and the
    late capture that lands afterwards does not authorise a repair either."""
    async with start_e2e(tmp_path, OVERRIDES, agents=AGENTS) as e2e, e2e.http() as lead:
        sid = (await e2e.tool(lead, "fleet_spawn", profile="sonnet", name="m-lost-3"))["sessionId"]
        bridge = e2e.service.bridge
        await e2e.until(lambda: bridge.reads.session(sid).state is SessionState.READY)  # type: ignore[union-attr]
        first = (await e2e.tool(lead, "fleet_send", target=sid, prompt="one"))["ticket"]
        await e2e.until(lambda: bridge.reads.ticket(first).terminal)  # type: ignore[union-attr]
        agent = e2e.simulator.agent("m-lost-3")
        await e2e.until(lambda: agent.status.value == "done")
        hold = ReadHold().install(e2e)
        hold.arm()
        send = asyncio.ensure_future(
            lead.post("/v1/tools/fleet_send", json={"target": sid, "prompt": "two"})
        )
        await e2e.until(
            lambda: sample(e2e.service.metrics.repairs_total, result="refused_no_capture") == 1
        )
        hold.release()
        ticket = (await e2e.run(send)).json()["result"]["ticket"]
        await e2e.advance(300)
        assert sample(e2e.service.metrics.repairs_total, result="refused_no_capture") == 1
        assert sample(e2e.service.metrics.repairs_total, result="repaired") == 0
        assert (await e2e.tool(lead, "fleet_poll", ticket=ticket))["status"] == "pending"
        assert_nothing_replayed(e2e)


async def test_refused_unreadable_then_repaired_on_the_one_delayed_retry(tmp_path: Path) -> None:
    """An unreadable pane refuses; a minute later the retry reads it and repairs."""
    async with start_e2e(tmp_path, OVERRIDES, agents=AGENTS) as e2e, e2e.http() as lead:
        lost = await lose_second_turn(e2e, lead, "m-lost-4")
        hold = ReadHold(failing=True).install(e2e)
        await e2e.until(lambda: lost.repairs("refused_unreadable") == 1)
        refused_at = e2e.clock.now()
        assert (await lost.poll(lost.ticket))["status"] == "pending"
        hold.failing = False
        await e2e.until(lambda: lost.repairs("repaired") == 1)
        assert (e2e.clock.now() - refused_at).total_seconds() >= 60
        assert (await lost.poll(lost.ticket))["source"] == "repaired"
        assert_nothing_replayed(e2e)


async def test_refused_unchanged_twice_stops_repair_for_the_token(tmp_path: Path) -> None:
    """The same answer as the turn before: refused, retried once, refused again, then left."""
    async with start_e2e(tmp_path, OVERRIDES, agents=AGENTS) as e2e, e2e.http() as lead:
        lost = await lose_second_turn(e2e, lead, "m-same-1")
        await e2e.until(lambda: lost.repairs("refused_unchanged") == 2, max_seconds=300)
        await e2e.advance(300)
        assert lost.repairs("refused_unchanged") == 2
        assert (await lost.poll(lost.ticket))["status"] == "pending"
        assert lost.session.state is SessionState.BUSY
        records = [r for r in await lost.health_records() if "repair_result" in r["evidence"]]
        assert [
            (r["evidence"]["repair_attempts"], r["evidence"]["repair_retry"]) for r in records
        ] == [
            ("1", "scheduled"),
            ("2", "none"),
        ]
        assert all(NOTHING_REBUILT in r["content"] for r in records)
        assert_nothing_replayed(e2e)


async def test_refused_ambiguous_output_on_an_error_screen(tmp_path: Path) -> None:
    """The turn ended on a fatal error screen, not an answer: nothing is reconstructed."""
    async with start_e2e(tmp_path, OVERRIDES, agents=AGENTS) as e2e, e2e.http() as lead:
        lost = await lose_second_turn(e2e, lead, "m-broke-1")
        result = "refused_ambiguous_output"
        await e2e.until(lambda: lost.repairs(result) == 2, max_seconds=300)
        assert (await lost.poll(lost.ticket))["status"] == "pending"
        listed = await e2e.tool(lead, "fleet_list")
        [incident] = [i for i in listed["incidents"] if i["subject"] == lost.session_id]
        assert (incident["state"], incident["repair"]["detail"]) == (
            "TURN_BOUNDARY_LOST",
            "error_on_screen",
        )
        assert_nothing_replayed(e2e)


async def test_repaired_clipped_text_keeps_both_markers(tmp_path: Path) -> None:
    """Text longer than bridge.maxScrapeChars: the tail, the repaired and the clipped marker."""
    overrides: dict[str, Any] = {**OVERRIDES, "bridge": {"maxScrapeChars": 10}}
    async with start_e2e(tmp_path, overrides, agents=AGENTS) as e2e, e2e.http() as lead:
        lost = await lose_second_turn(e2e, lead, "m-lost-5")
        await e2e.until(lambda: lost.repairs("repaired") == 1)
        content = (await lost.poll(lost.ticket))["content"]
        assert content == f"{REPAIRED_COMPLETION_MARKER}\n{CLIPPED_TAIL_MARKER}\n\nished two."
        assert_nothing_replayed(e2e)


async def test_an_explicit_fleet_reply_racing_the_repair_wins(tmp_path: Path) -> None:
    """The member's own reply lands while repair reads the pane: the reply is the result."""
    async with start_e2e(tmp_path, OVERRIDES, agents=AGENTS) as e2e, e2e.http() as lead:
        lost = await lose_second_turn(e2e, lead, "m-lost-6")
        hold = ReadHold().install(e2e)
        hold.arm()
        await e2e.until(hold.entered.is_set)
        answer = await lost.member_reply("my own words")
        assert (answer["ticket"], answer["late"]) == (lost.ticket, False)
        hold.release()
        await e2e.until(lambda: lost.repairs("race_lost") == 1)
        polled = await lost.poll(lost.ticket)
        assert (polled["source"], polled["content"]) == ("reply", "my own words")
        assert lost.repairs("repaired") == 0
        assert_nothing_replayed(e2e)


async def test_a_next_turn_send_racing_the_repair_waits_for_it(tmp_path: Path) -> None:
    """A send while repair reads the pane is typed only after the repaired turn is DONE, as a
    turn of its own; each ticket keeps its own result."""
    async with start_e2e(tmp_path, OVERRIDES, agents=AGENTS) as e2e, e2e.http() as lead:
        lost = await lose_second_turn(e2e, lead, "m-lost-7")
        hold = ReadHold().install(e2e)
        hold.arm()
        await e2e.until(hold.entered.is_set)
        held_at = len(e2e.herdr_requests)  # the repair's pane read is the next one sent
        third = await e2e.tool(lead, "fleet_send", target=lost.session_id, prompt="three")
        typed = [r["params"]["text"] for r in e2e.requests_to("agent.prompt")]
        assert "three" not in typed
        hold.release()
        await e2e.until(lambda: lost.repairs("repaired") == 1)
        agent = e2e.simulator.agent("m-lost-7")
        await e2e.until(lambda: agent.turns == 3)
        requests = list(enumerate(e2e.herdr_requests))
        repair_read = next(i for i, r in requests[held_at:] if r["method"] == "pane.read")
        [prompt_three] = [
            i
            for i, r in requests
            if r["method"] == "agent.prompt" and r["params"]["text"] == "three"
        ]
        assert prompt_three > repair_read
        repaired = await lost.poll(lost.ticket)
        assert repaired["content"].endswith("Finished two.")
        ticket = e2e.service.bridge.reads.ticket(third["ticket"])
        assert ticket is not None
        assert ticket.turn == 3
        assert_nothing_replayed(e2e)


async def test_concurrent_send_and_release_during_the_repair(tmp_path: Path) -> None:
    """A send and a stop while repair reads the pane: both tickets fail once, nothing typed."""
    async with start_e2e(tmp_path, OVERRIDES, agents=AGENTS) as e2e, e2e.http() as lead:
        lost = await lose_second_turn(e2e, lead, "m-lost-8")
        hold = ReadHold().install(e2e)
        hold.arm()
        await e2e.until(hold.entered.is_set)
        third = await e2e.tool(lead, "fleet_send", target=lost.session_id, prompt="three")
        await e2e.tool(lead, "fleet_stop", sessionId=lost.session_id)
        hold.release()
        await e2e.until(lambda: lost.repairs("race_lost") == 1)
        for ticket in (lost.ticket, third["ticket"]):
            assert (await lost.poll(ticket))["status"] == "failed"
        assert sample(e2e.service.metrics.tickets_total, outcome="failed", source="none") == 2
        assert "three" not in [r["params"]["text"] for r in e2e.requests_to("agent.prompt")]
        assert_nothing_replayed(e2e)


async def test_after_a_restart_without_capture_the_old_turn_is_never_repaired(
    tmp_path: Path,
) -> None:
    """fleetd crashes during a lost turn; the next run takes the turn back from the state store
    but has no baseline for it: the ticket stays pending, repair refuses saying fleetd restarted
    during that turn, and nothing is read or typed for the old turn (only status lookups)."""
    overrides: dict[str, Any] = {"herdr": SLOW_POLL, "health": HEALTH}
    async with start_e2e(tmp_path, overrides, agents=AGENTS) as first:
        async with first.http() as lead:
            lost = await lose_second_turn(first, lead, "m-lost-9")
            # the crash comes before this run could repair the turn: its pane reads fail from here
            ReadHold(failing=True).install(first)
            token = lost.token
        await first.crash()
        before = len(first.herdr_requests)
        async with (
            start_e2e(tmp_path, overrides, restart_of=first) as second,
            second.http() as lead,
        ):
            status = await second.run(
                lead.post("/v1/tools/fleet_poll", json={"ticket": lost.ticket})
            )
            assert status.json()["result"]["status"] == "pending"
            # health asks for the repair once the turn sits stable at the prompt (two sightings)
            reads = second.service.bridge.reads
            await second.until(
                lambda: (
                    (turn := reads.open_turn(lost.session_id)) is not None
                    and turn.repair.attempts > 0
                )
            )
            turn = reads.open_turn(lost.session_id)
            assert turn is not None
            assert (turn.repair.last, turn.repair.detail, turn.repair.retry_at) == (
                RepairResult.REFUSED_NO_CAPTURE.value,
                "fleetd_restarted_during_turn",
                None,
            )
            # asked again, the bridge refuses again: the token is never tried
            outcome = await second.run(
                second.service.bridge.repair.reconcile_lost_boundary("m-lost-9", token)
            )
            assert (outcome.result, outcome.detail) == (
                RepairResult.REFUSED_NO_CAPTURE,
                "repair_stopped_for_token",
            )
            await second.advance(120)
            after = second.herdr_requests[before:]
            pane = lost.session.pane_id
            looks = ("agent.get", "agent.list")
            assert not [
                r for r in after if r["params"].get("pane_id") == pane and r["method"] not in looks
            ]
            assert not [
                r
                for r in after
                if r["params"].get("target") == "m-lost-9" and r["method"] not in looks
            ]
            assert sample(second.service.metrics.repairs_total, result="repaired") == 0
            assert_nothing_replayed(second)
