"""The demo's last act, when an Alertmanager binary is on the PATH: the ``alertmanager`` sink kind.

The config file is rewritten with ``health.notifications.mode: alertmanager`` (a hot key, applied
on the next reload), the second lead dies again, and fleetd posts the incidents that go to a
person to a real Alertmanager (Debian's ``prometheus-alertmanager``, started here on a free
127.0.0.1 port, clustering off). Alertmanager groups them and notifies its own webhook receiver,
a small local server that prints what Alertmanager reports: ``firing``, then, once the lead is
started again, ``resolved``.

Alertmanager runs on real time and fleetd's demo on a simulated clock that runs ahead of it; an
alert whose ``endsAt`` lies in Alertmanager's future still fires. So with Alertmanager the demo's
clock starts :data:`CLOCK_BEHIND` back, and every resolution lies in Alertmanager's past.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import socket
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from fleetd.sim.server import HerdrSimulator

__all__ = [
    "CLOCK_BEHIND",
    "URL_ENV",
    "DemoAlertmanager",
    "alertmanager_act",
    "alertmanager_binary",
]

URL_ENV = "FLEETD_DEMO_ALERTMANAGER_URL"
CLOCK_BEHIND = timedelta(minutes=30)
"""How far back the demo's clock starts when it shows Alertmanager (longer than the script's
simulated time)."""

_NAMES = ("alertmanager", "prometheus-alertmanager")
_START_SECONDS = 30.0
_NOTIFY_SECONDS = 30.0  # Alertmanager's group_wait and group_interval are 1 s here
_MAX_REQUEST = 1024 * 1024
_CONFIG = """\
route:
  receiver: demo
  group_by: [alertname]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: demo
    webhook_configs:
      - url: {url}
        send_resolved: true
"""

Until = Callable[..., Awaitable[None]]
Drive = Callable[[Awaitable[None]], Awaitable[None]]


def alertmanager_binary() -> str | None:
    """The Alertmanager executable on the PATH, or ``None``."""
    for name in _NAMES:
        found = shutil.which(name)
        if found is not None:
            return found
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


class DemoAlertmanager:
    """A running Alertmanager and the receiver it notifies (which keeps each notification)."""

    def __init__(self, binary: str, root: Path, say: Callable[[str], None]) -> None:
        self._binary = binary
        self._root = root
        self._say = say
        self._process: asyncio.subprocess.Process | None = None
        self._server: asyncio.Server | None = None
        self.url = ""
        self.notifications: list[dict[str, Any]] = []
        self._arrived = asyncio.Event()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        receiver_port = self._server.sockets[0].getsockname()[1]
        self._root.mkdir(parents=True, exist_ok=True)
        config = self._root / "alertmanager.yml"
        config.write_text(_CONFIG.format(url=f"http://127.0.0.1:{receiver_port}/"))
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        with (self._root / "alertmanager.log").open("wb") as log:
            self._process = await asyncio.create_subprocess_exec(
                self._binary,
                f"--config.file={config}",
                f"--storage.path={self._root / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--cluster.listen-address=",
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
            )
        try:
            await asyncio.wait_for(self._ready(port), _START_SECONDS)
        except BaseException:
            await self.stop()
            raise

    async def _ready(self, port: int) -> None:
        """Until Alertmanager's ``/-/ready`` answers 200 (it exiting first is an error)."""
        while True:
            assert self._process is not None
            if self._process.returncode is not None:
                raise RuntimeError(f"alertmanager exited; see {self._root / 'alertmanager.log'}")
            with contextlib.suppress(OSError, TimeoutError):
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                try:
                    writer.write(b"GET /-/ready HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
                    status = await asyncio.wait_for(reader.readline(), 2.0)
                finally:
                    writer.close()
                if status.split()[1:2] == [b"200"]:
                    return
            await asyncio.sleep(0.1)  # the process is starting: look again shortly

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One HTTP/1.1 request from Alertmanager: keep its JSON body, answer 200, close."""
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10.0)
            length = 0
            for line in head.decode("latin-1").split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = min(int(value.strip()), _MAX_REQUEST)
            body = await asyncio.wait_for(reader.readexactly(length), 10.0)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            await writer.drain()
            document = json.loads(body)
            if isinstance(document, dict):
                self.notifications.append(document)
                self._say(f"alertmanager reports: {_summary(document)}")
                self._arrived.set()
        except (OSError, ValueError, TimeoutError, asyncio.LimitOverrunError, EOFError):
            pass  # not a notification: nothing to show
        finally:
            writer.close()

    async def firing(self) -> list[str]:
        """The alerts Alertmanager holds as firing now (``GET /api/v2/alerts``; an alert whose
        ``endsAt`` has passed is resolved): ``STATE of SUBJECT`` each."""
        async with httpx.AsyncClient(timeout=5.0, trust_env=False) as client:
            answer = await client.get(self.url + "/api/v2/alerts")
            answer.raise_for_status()
            alerts: list[dict[str, Any]] = answer.json()
        now = datetime.now(UTC)
        return sorted(
            f"{alert['labels'].get('state')} of {alert['annotations'].get('subject')}"
            for alert in alerts
            if datetime.fromisoformat(alert["endsAt"].replace("Z", "+00:00")) > now
        )

    async def reported(self, status: str) -> None:
        """Wait (real time, bounded) until a notification lists an alert with ``status``."""

        def seen() -> bool:
            return any(
                alert.get("status") == status
                for document in self.notifications
                for alert in document.get("alerts", [])
            )

        async def wait() -> None:
            while not seen():
                self._arrived.clear()
                await self._arrived.wait()

        await asyncio.wait_for(wait(), _NOTIFY_SECONDS)

    async def stop(self) -> None:
        process = self._process
        if process is not None and process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 10)
            except TimeoutError:
                process.kill()
                await process.wait()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


def _summary(document: dict[str, Any]) -> str:
    """``firing FleetdIncident: GONE of lead-b (firing), ...``: the group's status and alerts."""
    alerts = []
    for alert in document.get("alerts", []):
        labels = alert.get("labels", {})
        subject = alert.get("annotations", {}).get("subject", "?")
        alerts.append(f"{labels.get('state')} of {subject} ({alert.get('status')})")
    name = document.get("groupLabels", {}).get("alertname", "?")
    return f"{document.get('status')} {name}: " + ", ".join(alerts)


async def alertmanager_act(
    *,
    manager: DemoAlertmanager,
    switch: Callable[[], Awaitable[None]],
    simulator: HerdrSimulator,
    drive: Drive,
    until: Until,
    say: Callable[[str], None],
) -> None:
    """Switch to alertmanager mode, lose the second lead again, show Alertmanager firing, start
    the lead again, show Alertmanager resolved. ``drive`` runs fleet steps on the demo's clock;
    Alertmanager's notifications are waited for in real time, the clock standing still."""
    clock = simulator.clock
    say(f"Now the same with the alertmanager sink kind (Alertmanager at {manager.url}):")
    say("  config: health.notifications.mode: alertmanager (a hot key: no restart)")
    await switch()

    async def lose_lead() -> None:
        say("herdr: the agent of lead-b exits again")
        simulator.agent("lead-b").exit()
        await until(clock, manager.firing, bool, say, label="alertmanager holds")

    await drive(lose_lead())
    await manager.reported("firing")

    async def back() -> None:
        say("herdr: lead-b is started again by hand")
        simulator.start_by_hand("lead-b")

        async def own() -> list[str]:
            return [alert for alert in await manager.firing() if alert.endswith(" of lead-b")]

        await until(clock, own, lambda alerts: not alerts, say, label="alertmanager holds")

    await drive(back())
    await manager.reported("resolved")
