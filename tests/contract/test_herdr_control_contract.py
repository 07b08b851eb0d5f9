"""One AgentControl contract, run on FakeAgentControl and on the socket client + simulator."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable
from typing import Any, Protocol, TypeVar

import pytest

from fleetd.clock import FakeClock
from fleetd.errors import ControlLinkError, HerdrError, TargetNotFoundError
from fleetd.herdr.control import AgentControl, HerdrAgentControl
from fleetd.herdr.fake import FakeAgentControl
from fleetd.herdr.model import AgentStatus, ReadSource
from fleetd.sim.harness import SimHarness
from fleetd.sim.scenario import parse_scenario

T = TypeVar("T")
PANE_ID = re.compile(r"^w[1-9A-Z0]+:p\d+$")


class Backend(Protocol):
    port: AgentControl

    async def run(self, aw: Awaitable[T]) -> T: ...

    async def settle(self, seconds: float) -> None: ...

    def set_status(self, target: str, status: AgentStatus) -> None: ...

    def break_link(self) -> None: ...


class FakeBackend:
    def __init__(self) -> None:
        self.fake = FakeAgentControl()
        self.fake.add_agent("lead", kind="claude", cwd="/tmp/lead", screen="❯ ")
        self.fake.add_agent("m1", kind="codex", cwd="/tmp/m1", screen="› Ask Codex")
        self.fake.add_pane(cwd="/tmp/spare")
        self.port: AgentControl = self.fake

    async def run(self, aw: Awaitable[T]) -> T:
        return await aw

    async def settle(self, seconds: float) -> None:
        return None

    def set_status(self, target: str, status: AgentStatus) -> None:
        self.fake.set_status(target, status)

    def break_link(self) -> None:
        self.fake.link_down()


class SimBackend:
    def __init__(self, harness: SimHarness) -> None:
        self.h = harness
        self.port: AgentControl = HerdrAgentControl.over(harness.client)

    async def run(self, aw: Awaitable[T]) -> T:
        return await self.h.run(aw)

    async def settle(self, seconds: float) -> None:
        await self.h.advance(seconds)

    def set_status(self, target: str, status: AgentStatus) -> None:
        self.h.sim.set_status(target, status)

    def break_link(self) -> None:
        self.h.sim.unresponsive = True


SCENARIO = parse_scenario(
    {
        "defaults": {"start_seconds": 1.0},
        "existing": [
            {"name": "lead", "kind": "claude", "cwd": "/tmp/lead"},
            {"name": "m1", "kind": "codex", "cwd": "/tmp/m1"},
            {"shell": True, "cwd": "/tmp/spare"},
        ],
    }
)


@pytest.fixture(params=["fake", "socket"])
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    if request.param == "fake":
        yield FakeBackend()
        return
    async with SimHarness(SCENARIO, request_timeout=1.0) as harness:
        yield SimBackend(harness)


async def _pane_of(b: Backend, name: str) -> str:
    return (await b.run(b.port.get_agent(name))).pane_id


async def _spare(b: Backend) -> str:
    names = {a.pane_id for a in await b.run(b.port.list_agents())}
    pane = await b.run(b.port.create_pane(cwd="/tmp/new", env={"FLEETD_TOKEN": "tok"}))
    assert pane.pane_id not in names
    return pane.pane_id


def test_both_implementations_satisfy_the_port() -> None:
    """FakeAgentControl and HerdrAgentControl are AgentControl (structurally)."""
    assert isinstance(FakeAgentControl(), AgentControl)
    real = HerdrAgentControl.for_socket("/nonexistent.sock", clock=FakeClock(), request_timeout=1)
    assert isinstance(real, AgentControl)


async def test_ping_answers(backend: Backend) -> None:
    """ping reports a protocol number."""
    assert (await backend.run(backend.port.ping())).protocol == 20


async def test_list_and_get_agents(backend: Backend) -> None:
    """list_agents returns every agent; get_agent finds one by name or by pane id."""
    agents = await backend.run(backend.port.list_agents())
    assert sorted(a.name or "" for a in agents) == ["lead", "m1"]
    lead = await backend.run(backend.port.get_agent("lead"))
    assert lead.agent == "claude"
    assert lead.agent_status.at_prompt
    assert PANE_ID.match(lead.pane_id)
    assert lead.terminal_id.startswith("term_")
    same = await backend.run(backend.port.get_agent(lead.pane_id))
    assert same.name == "lead"


async def test_unknown_agent_is_target_not_found(backend: Backend) -> None:
    """An unknown target raises TargetNotFoundError(agent_not_found)."""
    with pytest.raises(TargetNotFoundError) as info:
        await backend.run(backend.port.get_agent("ghost"))
    assert info.value.code == "agent_not_found"


async def test_read_returns_pane_text(backend: Backend) -> None:
    """read returns the pane's text for the requested source."""
    pane_id = await _pane_of(backend, "lead")
    read = await backend.run(backend.port.read(pane_id, ReadSource.VISIBLE))
    assert read.pane_id == pane_id
    assert read.source is ReadSource.VISIBLE
    assert "❯" in read.text


async def test_read_of_unknown_pane_is_target_not_found(backend: Backend) -> None:
    """read of a pane that does not exist raises TargetNotFoundError(pane_not_found)."""
    with pytest.raises(TargetNotFoundError) as info:
        await backend.run(backend.port.read("w9:p9"))
    assert info.value.code == "pane_not_found"


async def test_prompt_accepted_at_prompt_refused_when_blocked_or_empty(backend: Backend) -> None:
    """prompt works for an agent at its prompt; blocked -> agent_blocked; empty -> refused."""
    prompted = await backend.run(backend.port.prompt("m1", "do the thing"))
    assert prompted.name == "m1"
    backend.set_status("lead", AgentStatus.BLOCKED)
    assert (await backend.run(backend.port.get_agent("lead"))).agent_status is AgentStatus.BLOCKED
    with pytest.raises(HerdrError) as blocked:
        await backend.run(backend.port.prompt("lead", "more"))
    assert blocked.value.code == "agent_blocked"
    with pytest.raises(HerdrError) as empty:
        await backend.run(backend.port.prompt("m1", ""))
    assert empty.value.code == "empty_agent_prompt"
    with pytest.raises(TargetNotFoundError):
        await backend.run(backend.port.prompt("ghost", "hi"))


async def test_status_done_then_seen(backend: Backend) -> None:
    """A status set to done reads back as done (both done and idle are at the prompt)."""
    backend.set_status("m1", AgentStatus.DONE)
    agent = await backend.run(backend.port.get_agent("m1"))
    assert agent.agent_status is AgentStatus.DONE
    assert agent.agent_status.at_prompt


async def test_input_and_keys(backend: Backend) -> None:
    """send_input goes to a pane, send_keys to an agent; unknown targets are not found."""
    pane_id = await _pane_of(backend, "lead")
    await backend.run(backend.port.send_input(pane_id, "hello", ["Enter"]))
    await backend.run(backend.port.send_keys("lead", ["esc"]))
    with pytest.raises(TargetNotFoundError):
        await backend.run(backend.port.send_input("w9:p9", "x"))
    with pytest.raises(TargetNotFoundError):
        await backend.run(backend.port.send_keys("ghost", ["esc"]))


async def test_start_agent_in_a_new_pane(backend: Backend) -> None:
    """start_agent answers launch_pending at once; the agent then becomes interactive."""
    pane_id = await _spare(backend)
    assert PANE_ID.match(pane_id)
    started = await backend.run(
        backend.port.start_agent(name="m2", kind="opencode", pane_id=pane_id)
    )
    assert started.agent.launch_pending
    assert started.agent.name == "m2"
    assert started.argv[0] == "opencode"
    await backend.settle(1.5)
    ready = await backend.run(backend.port.get_agent("m2"))
    assert ready.interactive_ready
    assert ready.pane_id == pane_id


@pytest.mark.parametrize(
    ("name", "kind", "where", "code"),
    [
        ("Bad Name", "claude", "spare", "invalid_agent_name"),
        ("m2", "emacs", "spare", "unsupported_agent_kind"),
        ("m1", "claude", "spare", "agent_name_taken"),
        ("m2", "claude", "busy", "agent_pane_busy"),
        ("m2", "claude", "missing", "agent_pane_not_found"),
    ],
)
async def test_start_agent_refusals(
    backend: Backend, name: str, kind: str, where: str, code: str
) -> None:
    """start_agent refuses bad names and kinds, taken names, busy and missing panes."""
    panes = {
        "spare": await _spare(backend),
        "busy": await _pane_of(backend, "lead"),
        "missing": "w9:p9",
    }
    with pytest.raises(HerdrError) as info:
        await backend.run(backend.port.start_agent(name=name, kind=kind, pane_id=panes[where]))
    assert info.value.code == code


async def test_create_pane_new_workspace_or_split(backend: Backend) -> None:
    """create_pane makes a new workspace pane, or a sibling when split_from is given."""
    root = await backend.run(backend.port.create_pane(cwd="/tmp/a", label="a"))
    sibling = await backend.run(backend.port.create_pane(cwd="/tmp/b", split_from=root.pane_id))
    assert PANE_ID.match(root.pane_id)
    assert sibling.workspace_id == root.workspace_id
    assert sibling.pane_id != root.pane_id
    assert sibling.terminal_id != root.terminal_id
    with pytest.raises(TargetNotFoundError):
        await backend.run(backend.port.create_pane(split_from="w9:p9"))


async def test_labelled_panes_finds_the_panes_of_a_workspace_by_its_label(
    backend: Backend,
) -> None:
    """The panes of the workspaces labelled so, splits included; none for a label no workspace
    has; a closed pane is no longer among them."""
    root = await backend.run(backend.port.create_pane(cwd="/tmp/a", label="sonnet-7"))
    split = await backend.run(backend.port.create_pane(cwd="/tmp/b", split_from=root.pane_id))
    await backend.run(backend.port.create_pane(cwd="/tmp/c", label="other"))
    found = await backend.run(backend.port.labelled_panes("sonnet-7"))
    assert sorted(p.pane_id for p in found) == sorted([root.pane_id, split.pane_id])
    assert all(p.agent is None for p in found)
    assert await backend.run(backend.port.labelled_panes("nobody")) == ()
    await backend.run(backend.port.close_pane(split.pane_id))
    found = await backend.run(backend.port.labelled_panes("sonnet-7"))
    assert [p.pane_id for p in found] == [root.pane_id]


async def test_close_pane_loses_the_target(backend: Backend) -> None:
    """After close_pane, the pane and its agent are not found; closing again is not found."""
    pane_id = await _pane_of(backend, "m1")
    await backend.run(backend.port.close_pane(pane_id))
    with pytest.raises(TargetNotFoundError):
        await backend.run(backend.port.get_agent("m1"))
    with pytest.raises(TargetNotFoundError):
        await backend.run(backend.port.read(pane_id))
    with pytest.raises(TargetNotFoundError):
        await backend.run(backend.port.close_pane(pane_id))


async def test_process_info_names_the_agent(backend: Backend) -> None:
    """process_info shows the agent kind as the foreground process of an agent pane."""
    pane_id = await _pane_of(backend, "m1")
    info = await backend.run(backend.port.process_info(pane_id))
    assert info.pane_id == pane_id
    assert info.foreground_processes[0].name == "codex"
    with pytest.raises(TargetNotFoundError):
        await backend.run(backend.port.process_info("w9:p9"))


@pytest.mark.parametrize("method", ["list_agents", "ping"])
async def test_broken_link_is_control_link_error(backend: Backend, method: str) -> None:
    """When herdr stops answering, calls fail with ControlLinkError."""
    backend.break_link()
    call: Any = getattr(backend.port, method)
    with pytest.raises(ControlLinkError):
        await backend.run(call())


async def test_every_port_method_passes_the_one_chokepoint_once(backend: Backend) -> None:
    """What is given to observe() sees each port call exactly once, under the port method's name,
    whether it answers or fails; every method of the port is covered."""
    seen: list[str] = []

    async def around(method: str, call: Awaitable[T], /) -> T:
        seen.append(method)
        return await call

    port = backend.port
    port.observe(around)
    m1 = await _pane_of(backend, "m1")
    await backend.run(port.ping())
    await backend.run(port.list_agents())
    await backend.run(port.read(m1))
    await backend.run(port.prompt("lead", "hello"))
    await backend.run(port.send_input(m1, "x"))
    await backend.run(port.send_keys("m1", ["esc"]))
    pane = await backend.run(port.create_pane(cwd="/tmp/new"))
    await backend.run(port.create_pane(cwd="/tmp/split", split_from=pane.pane_id))
    await backend.run(port.start_agent(name="m2", kind="claude", pane_id=pane.pane_id))
    await backend.run(port.process_info(pane.pane_id))
    await backend.run(port.labelled_panes("new"))
    await backend.run(port.close_pane(pane.pane_id))
    with pytest.raises(TargetNotFoundError):
        await backend.run(port.get_agent("ghost"))
    assert seen == [
        "get_agent",
        "ping",
        "list_agents",
        "read",
        "prompt",
        "send_input",
        "send_keys",
        "create_pane",
        "create_pane",
        "start_agent",
        "process_info",
        "labelled_panes",
        "close_pane",
        "get_agent",
    ]
    methods = {name for name in vars(AgentControl) if not name.startswith("_")}
    assert set(seen) == methods - {"observe"}
