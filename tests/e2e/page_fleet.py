"""Real processes and a real browser for the live page's tests.

``fleetd sim`` and ``fleetd serve`` run as subprocesses (as an operator runs them), and Debian's
``chromium`` is driven headless by Playwright, whose own browser download this project never
uses. Every request, console message and failed request of the page is recorded.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from playwright.sync_api import Page, ViewportSize, expect, sync_playwright

from tests.contract.journal_fixtures import postgres_reachable, require_postgres, schema_url

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
OPERATOR_TOKEN = "page-operator-token-0123456789"
LEAD_TOKEN = "page-lead-token-0123456789"
LEAD_B_TOKEN = "page-lead-b-token-0123456789"

# Members named *exit* lose their pane mid-turn: the bridge releases them and health reports a
# GONE incident on its next tick, resolved on the one after.
SCENARIO = """\
version: 1
defaults: {start_seconds: 0.5, react_seconds: 0.2, turn_seconds: 1.0, frame_seconds: 0.5,
           answer: "Done {prompt}."}
agents:
  "*exit*": {faults: [exit]}
existing:
  - {name: lead, kind: claude, cwd: /tmp/fleetd-page-test/lead, label: lead}
  - {name: lead-b, kind: codex, cwd: /tmp/fleetd-page-test/lead-b, label: lead-b}
"""


def chromium_path() -> str:
    """Debian's chromium; missing, it fails under CI=true (.ci/run installs it), else skips."""
    if CHROMIUM.exists():
        return str(CHROMIUM)
    if os.environ.get("CI") == "true":
        pytest.fail(f"{CHROMIUM} is missing: .ci/run installs Debian's chromium")
    pytest.skip(f"{CHROMIUM} is missing (Debian package chromium; .ci/run installs it)")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


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


def _started(proc: subprocess.Popen[bytes], marker: bytes, timeout: float = 30) -> None:
    """Read the output until ``marker`` (bounded), then drain the rest in the background."""
    assert proc.stdout is not None
    stream = proc.stdout

    def scan() -> bool:
        return any(marker in line for line in iter(stream.readline, b""))

    with ThreadPoolExecutor(max_workers=1) as pool:
        try:
            assert pool.submit(scan).result(timeout=timeout), "process ended before it was ready"
        except FutureTimeout:
            proc.kill()
            raise
    threading.Thread(target=lambda: [None for _ in iter(stream.readline, b"")], daemon=True).start()


@dataclass
class PageFleet:
    """``fleetd sim`` and ``fleetd serve`` (health on, two leads, an operator token)."""

    base: str
    config: Path
    env: dict[str, str]
    sim: subprocess.Popen[bytes]
    serve: subprocess.Popen[bytes] | None = None
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    journal_url: str = ""  # a PostgreSQL journal's URL (shared_page_fleet), else empty

    def start_serve(self) -> None:
        self.serve = _fleetd("serve", "--config", str(self.config), env=self.env)
        self.procs.append(self.serve)
        _started(self.serve, b"listening on")

    def kill_serve(self) -> None:
        """fleetd dies at once (SIGKILL): the page's requests find nobody there."""
        assert self.serve is not None
        self.serve.kill()
        self.serve.wait(timeout=10)

    def tool(self, token: str, tool: str, **args: Any) -> dict[str, Any]:
        auth = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=self.base, headers=auth, timeout=10) as client:
            body: dict[str, Any] = client.post(f"/v1/tools/{tool}", json=args).json()
        assert body["ok"], body
        result: dict[str, Any] = body["result"]
        return result


def _fleetd(*args: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "fleetd", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


@contextmanager
def _page_fleet(tmp_path: Path, extra: str = "") -> Iterator[PageFleet]:
    """``fleetd sim`` and ``fleetd serve`` with the page's config, ``extra`` lines appended."""
    sock = Path(tempfile.mkdtemp(prefix="fpage")) / "herdr.sock"
    port = _free_port()
    repo = _git_repo(tmp_path / "repo")
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(SCENARIO, encoding="utf-8")
    config = tmp_path / "fleetd.yaml"
    config.write_text(
        f"api:\n  host: 127.0.0.1\n  port: {port}\n"
        f"herdr:\n  socketPath: {sock}\n"
        "operatorTokenEnv: PAGE_OPERATOR\n"
        "leads:\n  - {name: lead, agent: lead, tokenEnv: PAGE_LEAD}\n"
        "  - {name: lead-b, agent: lead-b, tokenEnv: PAGE_LEAD_B}\n"
        "profiles:\n  sonnet:\n    kind: claude\n"
        f"worktrees:\n  root: {tmp_path / 'worktrees'}\n  defaultRepo: {repo}\n"
        "health:\n  enabled: true\n  snapshotIntervalSeconds: 15\n" + extra,
        encoding="utf-8",
    )
    env = {
        **os.environ,
        "PAGE_OPERATOR": OPERATOR_TOKEN,
        "PAGE_LEAD": LEAD_TOKEN,
        "PAGE_LEAD_B": LEAD_B_TOKEN,
    }
    sim = _fleetd("sim", "--socket", str(sock), "--scenario", str(scenario), env=env)
    fleet = PageFleet(base=f"http://127.0.0.1:{port}", config=config, env=env, sim=sim)
    fleet.procs.append(sim)
    try:
        _started(sim, b"listening on")
        fleet.start_serve()
        yield fleet
    finally:
        for proc in fleet.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
            assert proc.stdout is not None
            proc.stdout.close()


@pytest.fixture
def page_fleet(tmp_path: Path) -> Iterator[PageFleet]:
    """The page's fleet on its own SQLite journal: one fleetd."""
    with _page_fleet(tmp_path) as fleet:
        yield fleet


@pytest.fixture
def shared_page_fleet(tmp_path: Path) -> Iterator[PageFleet]:
    """The page's fleet as instance ``page-a`` on a PostgreSQL journal (a schema of its own, the
    URL in ``fleet.journal_url``) that other instances could share."""
    base = require_postgres(postgres_reachable())
    schema = f"fleetd_page_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as db:
        db.execute(f'CREATE SCHEMA "{schema}"')
    url = schema_url(base, schema)
    try:
        with _page_fleet(tmp_path, f"instance: page-a\njournal:\n  url: '{url}'\n") as fleet:
            fleet.journal_url = url
            yield fleet
    finally:
        with psycopg.connect(base, autocommit=True) as db:
            db.execute(f'DROP SCHEMA "{schema}" CASCADE')


@dataclass
class Recorded:
    """What the page did: every request URL, console message and failed request."""

    requests: list[str] = field(default_factory=list)
    console: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (url, reason)
    navigations: list[str] = field(default_factory=list)

    def errors(self) -> list[str]:
        return [text for kind, text in self.console if kind == "error"]


@pytest.fixture
def browser_page(request: pytest.FixtureRequest) -> Iterator[tuple[Page, Recorded]]:
    """A fresh headless chromium page (viewport from an indirect parameter) and its record."""
    executable = chromium_path()
    size: dict[str, int] = getattr(request, "param", None) or {"width": 1280, "height": 800}
    viewport = ViewportSize(width=size["width"], height=size["height"])
    record = Recorded()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_ARGS
        )
        try:
            context = browser.new_context(viewport=viewport)
            page = context.new_page()
            page.set_default_timeout(10_000)
            # Real processes on a shared machine: a spawn is ready in about a second, but give a
            # loaded one room (an incident's own waits pass their timeout explicitly).
            expect.set_options(timeout=20_000)
            page.on("request", lambda r: record.requests.append(r.url))
            page.on("console", lambda m: record.console.append((m.type, m.text)))
            page.on("pageerror", lambda e: record.console.append(("error", str(e))))
            page.on("requestfailed", lambda r: record.failed.append((r.url, r.failure or "")))
            page.on(
                "framenavigated",
                lambda f: record.navigations.append(f.url) if f.parent_frame is None else None,
            )
            yield page, record
        finally:
            browser.close()
