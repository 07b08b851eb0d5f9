"""Test helpers shipped with fleetd: one fleet built through the real composition root with fakes.

:func:`build_test_fleet` wires :func:`~fleetd.compose.build_service` with a
:class:`~fleetd.clock.FakeClock`, a :class:`~fleetd.herdr.fake.FakeAgentControl`, an
:class:`~fleetd.inbox.memory.InMemoryInbox` and :class:`~fleetd.bridge.worktrees.FakeWorktrees`,
so a test drives exactly the wiring production runs — the loops never start on their own; a test
moves the clock and runs one poller pass with :meth:`TestFleet.poll`.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleetd.api.tools import ToolRegistry, ToolResult
from fleetd.bridge import CheckedMemberViews
from fleetd.bridge.service import Bridge
from fleetd.bridge.sessions import Session
from fleetd.bridge.worktrees import FakeWorktrees
from fleetd.catalog.port import ModelCatalog
from fleetd.clock import FakeClock
from fleetd.compose import Fleetd, build_service
from fleetd.config import ConfigRef
from fleetd.config.loader import parse_config
from fleetd.herdr.fake import FakeAgentControl
from fleetd.herdr.model import AgentStatus
from fleetd.identity import Caller, Role
from fleetd.inbox.memory import InMemoryInbox
from fleetd.inbox.port import ReplyInbox
from fleetd.journal.memory import InMemoryJournal
from fleetd.journal.port import Journal
from fleetd.state.port import StateStore

__all__ = [
    "LEAD_TOKEN",
    "CheckedMemberViews",
    "Gate",
    "TestFleet",
    "build_test_fleet",
    "fleet_tool_registry",
    "hold_calls",
    "sample_document",
]

LEAD_TOKEN = "lead-token-for-tests-0001"  # noqa: S105 — a test credential
OPERATOR_TOKEN = "operator-token-for-tests-0001"  # noqa: S105 — a test credential


def sample_document(root: Path) -> dict[str, Any]:
    """A small config: two leads, three profiles, a worktree root under ``root``."""
    return {
        "api": {"publicUrl": "http://127.0.0.1:1"},
        "operatorTokenEnv": "T_OPERATOR",
        "leads": [
            {"name": "lead", "agent": "lead", "tokenEnv": "T_LEAD"},
            {"name": "lead-b", "agent": "lead-b", "tokenEnv": "T_LEAD_B"},
        ],
        "profiles": {
            "sonnet": {"kind": "claude", "maxLoad": 2},
            "codex": {"kind": "codex"},
            "opencode": {"kind": "opencode"},
        },
        "worktrees": {"root": str(root / "worktrees"), "defaultRepo": str(root / "repo")},
        "bridge": {"readinessGraceSeconds": 60, "submitRetryMs": 1500},
    }


@dataclass(slots=True, kw_only=True)
class TestFleet:
    """A service on fakes, plus the knobs a test turns."""

    __test__ = False  # not a pytest test class

    clock: FakeClock
    control: FakeAgentControl
    inbox: ReplyInbox
    worktrees: FakeWorktrees
    service: Fleetd
    root: Path

    @property
    def bridge(self) -> Bridge:
        return self.service.bridge

    @property
    def lead(self) -> Caller:
        return Caller(role=Role.LEAD, name="lead")

    async def call(self, tool: str, caller: Caller | None = None, **args: Any) -> ToolResult:
        """Call a tool as ``caller`` (the lead by default) through the registry."""
        return await self.service.registry.call(caller or self.lead, tool, args)

    async def ok(self, tool: str, caller: Caller | None = None, **args: Any) -> dict[str, Any]:
        """Call a tool and return its result; fail loudly if it failed."""
        result = await self.call(tool, caller, **args)
        assert result.ok, result.error
        assert result.result is not None
        return dict(result.result)

    async def poll(self, seconds: float = 0.25) -> None:
        """Move the clock, then run one status-poller pass."""
        self.clock.advance(seconds)
        await self.bridge.deliverer.poll_once()

    def session(self, session_id: str) -> Session:
        """The member as the bridge holds it now (a session is a value: read it again after
        anything that may change it)."""
        session = self.bridge.reads.session(session_id)
        assert session is not None, f"no session {session_id}"
        return session

    def member(self, session_id: str) -> Caller:
        """The caller a member's own token resolves to."""
        session = self.bridge.reads.session(session_id)
        assert session is not None
        assert session.pane_id is not None
        token = self.control.env_of(session.pane_id)["FLEETD_TOKEN"]
        return self.service.authenticator.authenticate(f"Bearer {token}")

    async def spawn_ready(self, profile: str = "sonnet", **args: Any) -> str:
        """Spawn a member and let it make contact; returns its session id."""
        row = await self.ok("fleet_spawn", profile=profile, **args)
        session_id: str = row["sessionId"]
        await self.service.registry.contact(self.member(session_id))
        return session_id

    def set_status(self, session_id: str, status: AgentStatus) -> None:
        session = self.bridge.reads.session(session_id)
        assert session is not None
        self.control.set_status(session.name, status)


def build_test_fleet(
    root: Path,
    *,
    document: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    inbox: ReplyInbox | None = None,
    control: FakeAgentControl | None = None,
    journal: Journal | None = None,
    check_views: bool = True,
    catalog: ModelCatalog | None = None,
    state: StateStore | None = None,
    worktrees: FakeWorktrees | None = None,
) -> TestFleet:
    """A fleet on fakes, built by the production composition root.

    Pass the ``control`` of an earlier fleet on the same ``root`` to restart fleetd against the
    herdr (and the state directory) that outlived the first process. With ``check_views`` (the
    default; benchmarks turn it off) every member view the bridge hands out is checked against
    one built from nothing (:class:`CheckedMemberViews`), so every test run through a test fleet
    also proves the kept views never go stale; so is every member row of ``GET /v1/fleet`` the
    encoded view keeps (:attr:`FleetBodies.check <fleetd.runtime.fleet_body.FleetBodies.check>`).
    Pass the ``state`` store of an earlier fleet too
    and the restarted one takes back what it held (call ``service.restore()``), and its
    ``worktrees`` for the worktrees that outlived it.
    """
    clock = FakeClock()
    env = {"T_LEAD": LEAD_TOKEN, "T_LEAD_B": LEAD_TOKEN + "-b", "T_OPERATOR": OPERATOR_TOKEN}
    env.update(environ or {})
    loaded = parse_config(dict(document or sample_document(root)), env, base_dir=root)
    ref = ConfigRef(loaded, environ=env, now=clock.now())
    if control is None:
        control = FakeAgentControl()
        control.add_agent("lead", kind="claude", status=AgentStatus.IDLE)
        control.add_agent("lead-b", kind="codex", status=AgentStatus.IDLE)
    inbox = inbox if inbox is not None else InMemoryInbox()
    worktrees = worktrees if worktrees is not None else FakeWorktrees()
    service = build_service(
        ref,
        environ=env,
        clock=clock,
        control=control,
        inbox=inbox,
        worktrees=worktrees,
        journal=journal if journal is not None else InMemoryJournal(),
        catalog=catalog,
        state=state,
    )
    if check_views:
        service.bridge.view.check_kept_views()
        service.views.bodies.check = True
    return TestFleet(
        clock=clock,
        control=control,
        inbox=inbox,
        worktrees=worktrees,
        service=service,
        root=root,
    )


def fleet_tool_registry() -> ToolRegistry:
    """The production tool registry (on fakes): the source of ``contracts/api``."""
    return build_test_fleet(Path(tempfile.gettempdir()) / "fleetd-contracts").service.registry


@dataclass(slots=True)
class Gate:
    """A held call: ``entered`` is set when the call arrives; it proceeds after ``release()``."""

    entered: asyncio.Event
    _open: asyncio.Event

    def release(self) -> None:
        self._open.set()


def hold_calls(target: object, method: str) -> Gate:
    """Make ``target.method`` (async) wait at a gate; a test uses it to pin down a race.

    Patches the instance attribute; the test fixture that built ``target`` owns its lifetime.
    """
    original = getattr(target, method)
    gate = Gate(entered=asyncio.Event(), _open=asyncio.Event())

    async def held(*args: Any, **kwargs: Any) -> Any:
        gate.entered.set()
        await gate._open.wait()
        return await original(*args, **kwargs)

    setattr(target, method, held)
    return gate
