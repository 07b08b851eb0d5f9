"""``fleetd sim`` and ``fleetd serve`` as real processes: the fleet view shows herdr's agents,
and SIGTERM stops both cleanly."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

import httpx
import pytest

OPERATOR = "serve-test-operator-token"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _fleetd(*args: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "fleetd", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def _wait_for_line(proc: subprocess.Popen[bytes], marker: bytes, timeout: float = 30) -> None:
    """Read the process's output until ``marker`` appears (bounded by ``timeout``)."""
    assert proc.stdout is not None
    stream = proc.stdout

    def scan() -> bool:
        return any(marker in line for line in iter(stream.readline, b""))

    with ThreadPoolExecutor(max_workers=1) as pool:
        found = pool.submit(scan)
        try:
            assert found.result(timeout=timeout), "process ended before it was ready"
        except FutureTimeout:
            proc.kill()
            raise


def _line_with(proc: subprocess.Popen[bytes], marker: bytes, timeout: float = 30) -> bytes:
    """The first line of the process's output holding ``marker`` (bounded by ``timeout``)."""
    assert proc.stdout is not None
    stream = proc.stdout

    def scan() -> bytes:
        return next((line for line in iter(stream.readline, b"") if marker in line), b"")

    with ThreadPoolExecutor(max_workers=1) as pool:
        found = pool.submit(scan)
        try:
            line = found.result(timeout=timeout)
        except FutureTimeout:
            proc.kill()
            raise
    assert line, f"process ended before it logged {marker!r}"
    return line


def _drain(proc: subprocess.Popen[bytes]) -> None:
    assert proc.stdout is not None
    for _ in iter(proc.stdout.readline, b""):
        pass


def _stop(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise


@contextlib.contextmanager
def beside_sim(
    tmp_path: Path, api: str = ""
) -> Iterator[tuple[int, subprocess.Popen[bytes], subprocess.Popen[bytes]]]:
    """``fleetd sim`` (the demo scenario) and ``fleetd serve`` beside it on a free port, with the
    operator's token and ``api`` (more lines of the ``api:`` block); both killed at the end."""
    sock = Path(tempfile.mkdtemp(prefix="fsrv")) / "herdr.sock"
    port = _free_port()
    config = tmp_path / "fleetd.yaml"
    config.write_text(
        f"api:\n  host: 127.0.0.1\n  port: {port}\n{api}"
        f"herdr:\n  socketPath: {sock}\n"
        "operatorTokenEnv: SERVE_TEST_OPERATOR\n",
        encoding="utf-8",
    )
    env = {**os.environ, "SERVE_TEST_OPERATOR": OPERATOR}
    sim = _fleetd("sim", "--socket", str(sock), "--scenario", "demo", env=env)
    serve = _fleetd("serve", "--config", str(config), env=env)
    try:
        yield port, sim, serve
    finally:
        for proc in (serve, sim):
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
            assert proc.stdout is not None
            proc.stdout.close()


@pytest.fixture
def processes(
    tmp_path: Path,
) -> Iterator[tuple[str, subprocess.Popen[bytes], subprocess.Popen[bytes]]]:
    with beside_sim(tmp_path) as (port, sim, serve):
        yield f"http://127.0.0.1:{port}", sim, serve


def test_fleet_view_shows_the_simulated_agents_and_sigterm_stops_cleanly(
    processes: tuple[str, subprocess.Popen[bytes], subprocess.Popen[bytes]],
) -> None:
    """Once up, ``fleetd serve`` freezes its start-up heap and spaces out young collections (the
    interpreter's count of frozen objects and its threshold are logged before it says it
    listens); GET /v1/fleet lists herdr's live agents;
    SIGTERM ends both processes with status 0."""
    base, sim, serve = processes
    frozen = _line_with(serve, b"start-up heap frozen")
    assert int(frozen.split(b"(")[1].split()[0]) > 10_000  # modules, the app, the config
    assert b"young collections every 50000 allocations" in frozen
    _wait_for_line(serve, b"listening on")
    threading.Thread(target=_drain, args=(serve,), daemon=True).start()
    with httpx.Client(timeout=10) as client:
        livez = client.get(f"{base}/livez")
        assert livez.status_code == 200
        view = client.get(f"{base}/v1/fleet", headers={"Authorization": f"Bearer {OPERATOR}"})
        assert view.status_code == 200, view.text
        agents = {a["name"] for a in view.json()["result"]["agents"]}
        assert {"lead", "lead-b"} <= agents
        assert view.json()["result"]["controlLink"]["state"] == "up"
        unauthenticated = client.get(f"{base}/v1/fleet")
        assert unauthenticated.status_code == 401
        metrics = client.get(f"{base}/metrics")
        assert "fleetd_tool_calls_total" in metrics.text or "fleet_health_incidents" in metrics.text
    assert _stop(serve) == 0
    assert _stop(sim) == 0


LEAD_TOKEN = "serve-test-lead-token-0123456789"


def _git_repo(path: Path) -> Path:
    path.mkdir()
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@fleetd.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@fleetd.invalid",
    }
    (path / "README.md").write_text("x\n", encoding="utf-8")
    for args in (["init", "-q", "-b", "main"], ["add", "README.md"], ["commit", "-qm", "start"]):
        subprocess.run(["git", *args], cwd=path, env=env, check=True)
    return path


@pytest.fixture
def scenario(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The simulator's scenario: the bundled demo, or the YAML text a test passes (indirect)."""
    text: str | None = getattr(request, "param", None)
    if text is None:
        return "demo"
    path = tmp_path / "scenario.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.fixture
def fleet_processes(
    tmp_path: Path, scenario: str
) -> Iterator[tuple[str, subprocess.Popen[bytes], subprocess.Popen[bytes]]]:
    sock = Path(tempfile.mkdtemp(prefix="fsrv")) / "herdr.sock"
    port = _free_port()
    repo = _git_repo(tmp_path / "repo")
    config = tmp_path / "fleetd.yaml"
    config.write_text(
        f"api:\n  host: 127.0.0.1\n  port: {port}\n"
        f"herdr:\n  socketPath: {sock}\n"
        "leads:\n  - name: lead\n    agent: lead\n    tokenEnv: SERVE_TEST_LEAD\n"
        "profiles:\n  sonnet:\n    kind: claude\n"
        f"worktrees:\n  root: {tmp_path / 'worktrees'}\n  defaultRepo: {repo}\n",
        encoding="utf-8",
    )
    env = {**os.environ, "SERVE_TEST_LEAD": LEAD_TOKEN}
    sim = _fleetd("sim", "--socket", str(sock), "--scenario", scenario, env=env)
    _wait_for_line(sim, b"listening on")
    serve = _fleetd("serve", "--config", str(config), env=env)
    try:
        yield f"http://127.0.0.1:{port}", sim, serve
    finally:
        for proc in (serve, sim):
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
            assert proc.stdout is not None
            proc.stdout.close()


def _poll_until(probe: Callable[[], Any], done: Callable[[Any], bool], limit: float = 30) -> Any:
    """Call ``probe`` until ``done`` holds (real processes: wall-clock bounded)."""
    deadline = time.monotonic() + limit
    while True:
        value = probe()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def test_a_member_spawned_against_fleetd_sim_becomes_ready_and_replies(
    fleet_processes: tuple[str, subprocess.Popen[bytes], subprocess.Popen[bytes]],
) -> None:
    """`fleetd sim` members call fleetd back: spawned over HTTP, ready, and a send gets a reply."""
    base, sim, serve = fleet_processes
    _wait_for_line(serve, b"listening on")
    for proc in (serve, sim):
        threading.Thread(target=_drain, args=(proc,), daemon=True).start()
    auth = {"Authorization": f"Bearer {LEAD_TOKEN}"}
    with httpx.Client(base_url=base, headers=auth, timeout=10) as client:

        def call(tool: str, **args: Any) -> dict[str, Any]:
            body: dict[str, Any] = client.post(f"/v1/tools/{tool}", json=args).json()
            assert body["ok"], body
            result: dict[str, Any] = body["result"]
            return result

        session = call("fleet_spawn", profile="sonnet")["sessionId"]
        state = _poll_until(
            lambda: call("fleet_status", sessionId=session)["state"], lambda s: s == "ready"
        )
        assert state == "ready"
        ticket = call("fleet_send", target=session, prompt="say hello")["ticket"]
        result = _poll_until(
            lambda: call("fleet_poll", ticket=ticket), lambda r: r["status"] != "pending"
        )
        assert result["status"] == "done"
        assert result["source"] == "reply"
    assert _stop(serve) == 0
    assert _stop(sim) == 0


SLOW_TURNS = """\
version: 1
defaults: {start_seconds: 0.5, react_seconds: 0.2, turn_seconds: 3600}
existing:
  - {name: lead, kind: claude, cwd: /tmp/fleetd-serve-test/lead, label: lead}
"""


@pytest.mark.parametrize("scenario", [SLOW_TURNS], indirect=True)
def test_sigterm_lets_a_long_synchronous_send_go_and_stops_promptly(
    fleet_processes: tuple[str, subprocess.Popen[bytes], subprocess.Popen[bytes]],
) -> None:
    """A lead waiting 600 s in fleet_send gets its ticket back at SIGTERM (still pending: the
    member keeps running and the next start adopts it); fleetd exits 0 at once."""
    base, sim, serve = fleet_processes
    _wait_for_line(serve, b"listening on")
    for proc in (serve, sim):
        threading.Thread(target=_drain, args=(proc,), daemon=True).start()
    auth = {"Authorization": f"Bearer {LEAD_TOKEN}"}
    with httpx.Client(base_url=base, headers=auth, timeout=60) as client:
        session = client.post("/v1/tools/fleet_spawn", json={"profile": "sonnet"}).json()
        sid = session["result"]["sessionId"]
        _poll_until(
            lambda: client.post("/v1/tools/fleet_status", json={"sessionId": sid}).json(),
            lambda body: body["result"]["state"] == "ready",
        )
        answers: list[dict[str, Any]] = []
        sender = threading.Thread(
            target=lambda: answers.append(
                client.post(
                    "/v1/tools/fleet_send", json={"target": sid, "prompt": "work", "wait": 600}
                ).json()
            ),
            daemon=True,
        )
        sender.start()
        status = _poll_until(
            lambda: client.post("/v1/tools/fleet_status", json={"sessionId": sid}).json(),
            lambda body: body["result"]["state"] == "busy",
        )
        assert status["result"]["state"] == "busy"
        started = time.monotonic()
        serve.send_signal(signal.SIGTERM)
        sender.join(timeout=15)
        assert answers, "the waiting fleet_send was not let go"
        assert answers[0]["ok"], answers[0]
        assert answers[0]["result"]["status"] == "pending"
        assert serve.wait(timeout=15) == 0
        assert time.monotonic() - started < 15
    assert _stop(sim) == 0
