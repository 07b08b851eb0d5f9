"""`fleetd sim` entry points: run_sim serves a scenario until cancelled; main checks its args."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetd.clock import SystemClock
from fleetd.sim import main, run_sim
from fleetd.sim.client import SimClient


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory short enough for AF_UNIX socket paths."""
    path = Path(tempfile.mkdtemp(prefix="frun"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def test_run_sim_serves_the_bundled_demo_until_cancelled(short_dir: Path) -> None:
    """run_sim listens, answers with the demo herd, and removes its socket when cancelled."""
    path = short_dir / "herdr.sock"
    ready = asyncio.Event()
    server = asyncio.ensure_future(run_sim(path, "demo", ready=ready))
    await asyncio.wait_for(ready.wait(), timeout=10)
    client = SimClient(path, clock=SystemClock(), request_timeout=2)
    names = sorted(a.name or "" for a in await client.agent_list())
    assert names == ["lead", "lead-b"]
    server.cancel()
    with pytest.raises(asyncio.CancelledError):
        await server
    assert not path.exists()


async def test_run_sim_accepts_a_scenario_file(short_dir: Path) -> None:
    """A YAML scenario path is loaded as is."""
    scenario = short_dir / "s.yaml"
    scenario.write_text("existing:\n  - {name: solo, kind: opencode}\n", encoding="utf-8")
    path = short_dir / "herdr.sock"
    ready = asyncio.Event()
    server = asyncio.ensure_future(run_sim(path, scenario, ready=ready))
    try:
        await asyncio.wait_for(ready.wait(), timeout=10)
        client = SimClient(path, clock=SystemClock(), request_timeout=2)
        assert (await client.agent_get("solo")).agent == "opencode"
    finally:
        server.cancel()
        await asyncio.gather(server, return_exceptions=True)


@pytest.mark.parametrize("scenario", ["no-such-scenario", "/nonexistent/dir/x.yaml"])
def test_main_refuses_a_bad_scenario_with_exit_code_2(
    scenario: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """main returns 2 and says why when the scenario cannot be loaded."""
    assert main(["--socket", "/tmp/unused.sock", "--scenario", scenario]) == 2
    assert "scenario" in capsys.readouterr().err
