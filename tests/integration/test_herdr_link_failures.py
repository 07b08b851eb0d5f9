"""Every way the herdr link fails ends in ControlLinkError, promptly, never a hang."""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from fleetd.clock import FakeClock, SystemClock
from fleetd.errors import ControlLinkError, LinkCause
from fleetd.herdr.client import link_cause
from fleetd.herdr.model import AgentStatus
from fleetd.sim.client import SimClient
from fleetd.sim.harness import SimHarness, drive
from fleetd.sim.scenario import parse_scenario

LEAD = parse_scenario({"existing": [{"name": "lead", "kind": "claude"}]})
Responder = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory short enough for AF_UNIX socket paths."""
    path = Path(tempfile.mkdtemp(prefix="flink"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@contextlib.asynccontextmanager
async def raw_server(path: Path, respond: Responder) -> AsyncIterator[None]:
    server = await asyncio.start_unix_server(respond, path=str(path))
    try:
        yield
    finally:
        server.close()
        await server.wait_closed()


async def test_missing_socket_is_a_link_error(short_dir: Path) -> None:
    """No socket file: connect_failed at once."""
    client = SimClient(short_dir / "none.sock", clock=FakeClock(), request_timeout=1)
    with pytest.raises(ControlLinkError) as info:
        await client.ping()
    assert info.value.code == "connect_failed"
    assert info.value.method == "ping"
    assert info.value.cause is LinkCause.SOCKET_MISSING


async def test_stale_socket_file_is_a_link_error(short_dir: Path) -> None:
    """A socket file nobody listens on (herdr died): connection refused -> ControlLinkError."""
    path = short_dir / "stale.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.close()
    client = SimClient(path, clock=FakeClock(), request_timeout=1)
    with pytest.raises(ControlLinkError) as info:
        await client.agent_list()
    assert info.value.code == "connect_failed"
    assert info.value.cause is LinkCause.REFUSED


async def test_stopping_the_simulator_mid_call_fails_the_call() -> None:
    """A wait in flight when the simulator stops ends with ControlLinkError, not a hang."""
    async with SimHarness(LEAD) as h:
        pending = asyncio.ensure_future(h.client.agent_wait("lead", [AgentStatus.WORKING]))
        await h.advance(0.3)
        assert not pending.done()
        await h.sim.stop()
        with pytest.raises(ControlLinkError) as info:
            await asyncio.wait_for(pending, timeout=5)
        assert info.value.code == "connection_lost"


async def test_killing_a_simulator_process_mid_call_fails_the_call(short_dir: Path) -> None:
    """SIGKILL of a `fleetd sim` process during a held call gives ControlLinkError promptly."""
    path = short_dir / "proc.sock"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c",
        "import sys; from fleetd.sim import main; sys.exit(main(sys.argv[1:]))",
        "--socket", str(path), "--scenario", "demo",
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), timeout=20)
        assert b"listening" in line
        client = SimClient(path, clock=SystemClock(), request_timeout=2)
        assert (await client.agent_get("lead")).name == "lead"
        pending = asyncio.ensure_future(client.agent_wait("lead", [AgentStatus.BLOCKED]))
        await asyncio.wait({pending}, timeout=0.3)
        assert not pending.done()
        proc.send_signal(signal.SIGKILL)
        with pytest.raises(ControlLinkError):
            await asyncio.wait_for(pending, timeout=5)
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()


async def test_unresponsive_server_times_out_as_link_error() -> None:
    """The `stop answering` fault: the request deadline passes -> ControlLinkError."""
    async with SimHarness(LEAD, request_timeout=2.0) as h:
        h.sim.unresponsive = True
        with pytest.raises(ControlLinkError) as info:
            await h.run(h.client.agent_list(), max_seconds=10)
        assert info.value.code == "request_timeout"
        assert info.value.cause is LinkCause.TIMEOUT
        assert h.clock.monotonic() == pytest.approx(2.0, abs=0.1)
        with pytest.raises(ControlLinkError):
            await h.run(h.client.agent_wait("lead", max_wait=3.0), max_seconds=10)
        h.sim.unresponsive = False
        assert (await h.run(h.client.ping())).protocol == 20


@pytest.mark.parametrize(("latency", "ok"), [(1.0, True), (3.0, False)])
async def test_slow_server_answers_within_or_fails_past_the_deadline(
    latency: float, ok: bool
) -> None:
    """The `answer slowly` fault: under the request timeout it answers, over it fails."""
    async with SimHarness(LEAD, request_timeout=2.0) as h:
        h.sim.latency_seconds = latency
        if ok:
            assert len(await h.run(h.client.agent_list())) == 1
        else:
            with pytest.raises(ControlLinkError):
                await h.run(h.client.agent_list())


async def test_scenario_can_start_unresponsive() -> None:
    """`server.unresponsive: true` in a scenario makes even ping time out."""
    scenario = parse_scenario({"server": {"unresponsive": True}})
    async with SimHarness(scenario, request_timeout=1.0) as h:
        with pytest.raises(ControlLinkError):
            await h.run(h.client.ping())


async def _close_at_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.readline()
    writer.close()


async def _garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.readline()
    writer.write(b"\x00\x01binary-tui-protocol\n")
    await writer.drain()
    writer.close()


@pytest.mark.parametrize(
    ("respond", "code", "cause"),
    [
        (_close_at_once, "connection_lost", LinkCause.CLOSED),
        (_garbage, "invalid_response", LinkCause.INVALID_RESPONSE),
    ],
)
async def test_server_that_is_not_herdr_is_a_link_error(
    short_dir: Path, respond: Responder, code: str, cause: LinkCause
) -> None:
    """EOF before an answer, or an answer that is not herdr JSON, is ControlLinkError; its cause
    class tells the two apart."""
    path = short_dir / "raw.sock"
    async with raw_server(path, respond):
        client = SimClient(path, clock=FakeClock(), request_timeout=1)
        with pytest.raises(ControlLinkError) as info:
            await client.ping()
        assert info.value.code == code
        assert info.value.cause is cause


async def test_deadline_runs_on_the_injected_clock(short_dir: Path) -> None:
    """A silent server fails the call exactly when the fake clock passes request_timeout."""
    path = short_dir / "silent.sock"
    held = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        held.set()
        await reader.read()
        writer.close()

    clock = FakeClock()
    async with raw_server(path, silent):
        client = SimClient(path, clock=clock, request_timeout=1.5)
        with pytest.raises(ControlLinkError) as info:
            await drive(clock, client.ping(), step=0.5)
        assert info.value.code == "request_timeout"
        assert held.is_set()
        assert clock.monotonic() == pytest.approx(1.5)


async def test_unknown_status_and_fields_over_the_wire(short_dir: Path) -> None:
    """A newer herdr's extra fields and an unknown status parse; the status is UNKNOWN."""
    path = short_dir / "new.sock"
    seen_ids: list[str] = []

    async def newer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readline()
        request_id = request.split(b'"id":"', 1)[1].split(b'"', 1)[0]
        seen_ids.append(request_id.decode())
        writer.write(
            b'{"id":"' + request_id + b'","result":{"type":"agent_list","cursor":7,"agents":['
            b'{"terminal_id":"term_9","agent_status":"compacting","workspace_id":"w1",'
            b'"tab_id":"w1:t1","pane_id":"w1:p1","focused":false,"revision":0,'
            b'"agent":"claude","tokens":{"in":"3k"},"surface":{"kind":"x"}}]},"trace":"t"}\n'
        )
        await writer.drain()
        writer.close()

    async with raw_server(path, newer):
        client = SimClient(path, clock=FakeClock(), request_timeout=1)
        (agent,) = await client.agent_list()
    assert agent.agent_status is AgentStatus.UNKNOWN
    assert not agent.agent_status.at_prompt
    assert re.fullmatch(r"[0-9a-f]{32}", seen_ids[0])


async def test_a_live_request_limit_is_read_at_each_call(short_dir: Path) -> None:
    """A watchdog given as a function (a hot config key) applies from the next call on."""
    path = short_dir / "silent2.sock"

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        await reader.read()
        writer.close()

    limit = [1.0]
    clock = FakeClock()
    async with raw_server(path, silent):
        client = SimClient(path, clock=clock, request_timeout=lambda: limit[0])
        with pytest.raises(ControlLinkError):
            await drive(clock, client.ping(), step=0.5)
        assert clock.monotonic() == pytest.approx(1.0)
        limit[0] = 2.5
        with pytest.raises(ControlLinkError) as info:
            await drive(clock, client.ping(), step=0.5)
        assert info.value.code == "request_timeout"
        assert clock.monotonic() == pytest.approx(3.5)


@pytest.mark.parametrize(
    ("error", "cause"),
    [
        (ConnectionRefusedError(), LinkCause.REFUSED),
        (FileNotFoundError(), LinkCause.SOCKET_MISSING),
        (PermissionError(), LinkCause.PERMISSION),
        (ConnectionResetError(), LinkCause.RESET),
        (BrokenPipeError(), LinkCause.RESET),
        (TimeoutError(), LinkCause.TIMEOUT),
        (ValueError(), LinkCause.TOO_LARGE),
        (OSError(), LinkCause.OTHER),
    ],
)
def test_each_socket_error_has_a_bounded_cause(error: BaseException, cause: LinkCause) -> None:
    """Issue 20 2e: every foreign socket error maps to one bounded cause class."""
    assert link_cause(error) is cause
