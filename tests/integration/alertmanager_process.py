"""A real Alertmanager for tests: Debian's ``prometheus-alertmanager`` (or ``alertmanager`` on
the PATH), started on a free 127.0.0.1 port with clustering off and a config that routes every
alert, grouped by ``alertname``, to one local webhook receiver (resolved alerts too).

Without the binary a test is skipped — but under ``CI=true`` it fails: CI installs the package
(``.ci/run``)."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path
from types import TracebackType

import httpx
import pytest

from fleetd.demo.alertmanager import alertmanager_binary as find_alertmanager

__all__ = ["Alertmanager", "alertmanager_binary"]

_START_LIMIT = 30.0

_CONFIG = """\
global:
  resolve_timeout: 5m
route:
  receiver: local
  group_by: [alertname]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: local
    webhook_configs:
      - url: {url}
        send_resolved: true
"""


def alertmanager_binary() -> str:
    """The Alertmanager executable; skips (fails under ``CI=true``) when there is none."""
    found = find_alertmanager()
    if found is not None:
        return found
    if os.environ.get("CI") == "true":
        pytest.fail("no alertmanager binary (Debian package prometheus-alertmanager); CI needs it")
    pytest.skip("no alertmanager binary (install Debian's prometheus-alertmanager)")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Alertmanager:
    """``async with Alertmanager(tmp, receiver_url) as am``: running and ready; ``am.url`` is
    its base URL."""

    def __init__(self, root: Path, receiver_url: str) -> None:
        self._root = root
        self._receiver_url = receiver_url
        self._process: asyncio.subprocess.Process | None = None
        self.url = ""

    async def __aenter__(self) -> Alertmanager:
        binary = alertmanager_binary()
        self._root.mkdir(parents=True, exist_ok=True)
        config = self._root / "alertmanager.yml"
        config.write_text(_CONFIG.format(url=self._receiver_url))
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        with (self._root / "alertmanager.log").open("wb") as log:
            self._process = await asyncio.create_subprocess_exec(
                binary,
                f"--config.file={config}",
                f"--storage.path={self._root / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--cluster.listen-address=",
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
            )
        try:
            await asyncio.wait_for(self._ready(), _START_LIMIT)
        except BaseException:
            await self._stop()
            raise
        return self

    async def _ready(self) -> None:
        async with httpx.AsyncClient(timeout=2.0) as client:
            while True:
                assert self._process is not None
                if self._process.returncode is not None:
                    text = (self._root / "alertmanager.log").read_text(errors="replace")
                    raise AssertionError(f"alertmanager exited:\n{text}")
                try:
                    if (await client.get(self.url + "/-/ready")).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.1)  # the process is starting: poll its readiness

    async def alerts(self) -> list[dict[str, object]]:
        """What Alertmanager holds now (``GET /api/v2/alerts``)."""
        async with httpx.AsyncClient(timeout=5.0) as client:
            response = await client.get(self.url + "/api/v2/alerts")
            response.raise_for_status()
            alerts: list[dict[str, object]] = response.json()
            return alerts

    async def _stop(self) -> None:
        process = self._process
        if process is None or process.returncode is not None:
            return
        process.terminate()
        try:
            await asyncio.wait_for(process.wait(), 10)
        except TimeoutError:
            process.kill()
            await asyncio.wait_for(process.wait(), 10)

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self._stop()
