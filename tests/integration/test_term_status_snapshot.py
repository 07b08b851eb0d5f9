"""``fleetd status`` as a process against ``fleetd serve`` and ``fleetd sim`` processes: its
screen, with the port, view version and time masked, matches the snapshot in
``snapshots/status_serve_sim.txt``, for the operator and for a lead."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.test_serve_process import (
    _drain,
    _fleetd,
    _free_port,
    _poll_until,
    _stop,
    _wait_for_line,
)

OPERATOR = "status-test-operator-token"
LEAD_B = "status-test-lead-b-token-0123"
SNAPSHOT = Path(__file__).parent / "snapshots" / "status_serve_sim.txt"
STATUS_TIMEOUT = 30


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """``fleetd sim`` (the demo scenario: agents lead and lead-b) and ``fleetd serve`` with
    both as leads, once herdr's agents were listed."""
    sock = Path(tempfile.mkdtemp(prefix="fstat")) / "herdr.sock"
    port = _free_port()
    config = tmp_path / "fleetd.yaml"
    config.write_text(
        f"api:\n  host: 127.0.0.1\n  port: {port}\n"
        f"herdr:\n  socketPath: {sock}\n"
        "operatorTokenEnv: STATUS_OPERATOR\n"
        "leads:\n"
        "  - {name: lead, agent: lead, tokenEnv: STATUS_LEAD}\n"
        "  - {name: lead-b, agent: lead-b, tokenEnv: STATUS_LEAD_B}\n",
        encoding="utf-8",
    )
    env = {
        **os.environ,
        "STATUS_OPERATOR": OPERATOR,
        "STATUS_LEAD": "status-test-lead-token-000000",
        "STATUS_LEAD_B": LEAD_B,
    }
    sim = _fleetd("sim", "--socket", str(sock), "--scenario", "demo", env=env)
    _wait_for_line(sim, b"listening on")
    serve = _fleetd("serve", "--config", str(config), env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_for_line(serve, b"listening on")
        for proc in (serve, sim):
            threading.Thread(target=_drain, args=(proc,), daemon=True).start()
        headers = {"Authorization": f"Bearer {OPERATOR}"}
        with httpx.Client(timeout=10) as client:
            view = _poll_until(
                lambda: client.get(f"{base}/v1/fleet", headers=headers).json()["result"],
                lambda v: v["controlLink"]["state"] == "up" and v["agentsListedAt"] is not None,
            )
        assert view["controlLink"]["state"] == "up"
        yield base
        assert _stop(serve) == 0
        assert _stop(sim) == 0
    finally:
        for proc in (serve, sim):
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
            assert proc.stdout is not None
            proc.stdout.close()


def _status(base: str, token: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FLEETD_URL": base, "FLEETD_TOKEN": token, "COLUMNS": "80"}
    env["LINES"] = "24"
    return subprocess.run(
        [sys.executable, "-m", "fleetd", "status"],
        env=env,
        capture_output=True,
        text=True,
        timeout=STATUS_TIMEOUT,
        check=False,
    )


def _masked(text: str) -> str:
    text = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", text)
    text = re.sub(r"view \d+", "view N", text)
    return re.sub(r"\d\d:\d\d:\d\dZ", "HH:MM:SSZ", text)


def _snapshot(name: str) -> str:
    """The named block of the snapshot file (blocks start with ``## name``)."""
    blocks = SNAPSHOT.read_text(encoding="utf-8").split("## ")
    [block] = [b for b in blocks if b.startswith(name + "\n")]
    return block.split("\n", 1)[1]


def test_status_against_serve_and_sim_matches_the_snapshot(served: str) -> None:
    """The operator's and lead-b's screens, masked, are the snapshot's; each fits 80×24 and
    the command exits 0 with nothing on stderr."""
    for name, token in (("operator", OPERATOR), ("lead-b", LEAD_B)):
        shown = _status(served, token)
        assert (shown.returncode, shown.stderr) == (0, "")
        lines = shown.stdout.splitlines()
        assert len(lines) <= 24
        assert max(len(line) for line in lines) <= 80
        assert _masked(shown.stdout) == _snapshot(name)
