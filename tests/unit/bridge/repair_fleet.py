"""Builders for lost-boundary repair tests on fakes: screens, a lost turn, herdr call checks."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleetd.bridge import Ticket
from fleetd.bridge.sessions import Session
from fleetd.herdr.fake import FakeCall
from fleetd.herdr.model import AgentStatus
from fleetd.testing import TestFleet, build_test_fleet, sample_document

RULE = "─" * 40
REPAIR_CALLS = frozenset({"get_agent", "read"})
"""The only herdr methods lost-boundary repair may use: a lookup and one pane read."""


def claude_screen(prompt: str, answer: str | None) -> str:
    """A Claude Code pane at its prompt whose current turn ends with ``answer`` (or nothing)."""
    lines = [f"❯ {prompt}", ""]
    if answer is not None:
        lines += [f"● {answer}", ""]
    return "\n".join([*lines, RULE, "❯ ", RULE, "  ? for shortcuts"])


def codex_screen(prompt: str, answer: str) -> str:
    """A Codex pane at its composer after a turn whose last message is ``answer``."""
    return "\n".join(
        [f"› {prompt}", "", f"• {answer}", "", "─ Worked for 3s " + "─" * 30, "", "› ", ""]
    )


ERROR_SCREEN = (
    "❯ two\n\n● API Error: 529 Overloaded. This is a server-side issue, usually temporary — try"
    " again in a moment. If it persists, check https://status.claude.com.\n\n"
    f"{RULE}\n❯ \n{RULE}\n  ? for shortcuts"
)


async def repair_fleet(
    root: Path, *, health: dict[str, Any] | None = None, **bridge: Any
) -> TestFleet:
    """A fleet on fakes (``bridge`` keys merged into the bridge section, ``health`` as the
    health section) with its leads' inboxes owned."""
    document = sample_document(root)
    document["bridge"] = {**document["bridge"], **bridge}
    if health is not None:
        document["health"] = health
    fleet = build_test_fleet(root, document=document)
    await fleet.service.own_lead_keys()
    return fleet


@dataclass
class LostTurn:
    """A member whose second turn was delivered and whose boundary then went unseen."""

    fleet: TestFleet
    session_id: str
    first: str
    ticket: str
    token: str

    @property
    def session(self) -> Session:
        """The member as the bridge holds it now."""
        return self.fleet.session(self.session_id)

    @property
    def pane(self) -> str:
        assert self.session.pane_id is not None
        return self.session.pane_id

    def show(self, text: str) -> None:
        self.fleet.control.set_screen(self.pane, text)

    def status(self, status: AgentStatus) -> None:
        self.fleet.control.set_status(self.session.name, status)

    async def snapshot(self) -> None:
        """One fleet-wide list, recorded on the open turn as the health monitor records it."""
        listed = await self.fleet.control.list_agents()
        self.fleet.bridge.repair.observe({agent.terminal_id: agent for agent in listed})

    async def finish_unseen(self, screen: str) -> None:
        """The member works and returns to its prompt between two looks, then two snapshots."""
        self.status(AgentStatus.WORKING)
        self.show(screen)
        self.status(AgentStatus.DONE)
        await self.snapshot()
        await self.snapshot()

    async def reconcile(self) -> Any:
        return await self.fleet.bridge.repair.reconcile_lost_boundary(self.session.name, self.token)


async def lost_turn(
    fleet: TestFleet,
    *,
    profile: str = "sonnet",
    first_screen: str | None = None,
    turns_before: int = 1,
) -> LostTurn:
    """Spawn, let ``turns_before`` turns end by ``fleet_reply`` (their answers on screen), then
    deliver the turn that will be lost (the baseline shows the previous answer)."""
    sid = await fleet.spawn_ready(profile)
    session = fleet.bridge.reads.session(sid)
    assert session is not None
    assert session.pane_id is not None
    first = ""
    for n in range(turns_before):
        screen = first_screen or claude_screen(f"turn {n}", f"Answer {n}.")
        fleet.control.set_screen(session.pane_id, screen)
        first = (await fleet.ok("fleet_send", target=sid, prompt=f"turn {n}"))["ticket"]
        await fleet.ok("fleet_reply", fleet.member(sid), content=f"Answer {n}.")
    if turns_before == 0 and first_screen is not None:
        fleet.control.set_screen(session.pane_id, first_screen)
    ticket = (await fleet.ok("fleet_send", target=sid, prompt="two"))["ticket"]
    turn = fleet.bridge.reads.open_turn(sid)
    assert turn is not None
    return LostTurn(
        fleet=fleet, session_id=sid, first=first, ticket=ticket, token=turn.token.token_id
    )


def calls_since(fleet: TestFleet, mark: int) -> list[FakeCall]:
    return fleet.control.calls[mark:]


def only_repair_calls(calls: Iterable[FakeCall]) -> bool:
    """True when ``calls`` hold nothing but lookups and pane reads (nothing typed)."""
    return {c.method for c in calls} <= REPAIR_CALLS


def assert_never_replayed(calls: Sequence[FakeCall], tickets: Iterable[Ticket]) -> None:
    """Criterion 20 over every recorded herdr request: each delivered task was typed exactly
    once, to its own target, and nothing else was ever typed (Enter re-submits aside)."""
    prompts = [c for c in calls if c.method == "prompt"]
    texts = [c.args["text"] for c in prompts]
    assert len(texts) == len(set(texts)), "a prompt was typed twice"
    assert not [c for c in calls if c.method == "send_input"], "text was typed into a pane"
    keys = [c.args["keys"] for c in calls if c.method == "send_keys"]
    assert all(k == ("enter",) for k in keys), "keys other than an Enter re-submit were sent"
    delivered = [t for t in tickets if t.delivered_at is not None]
    assert len(prompts) == len(delivered)
    for ticket in delivered:
        assert ticket.prompt is None  # the brief is gone: nothing can rebuild it
