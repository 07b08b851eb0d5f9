"""``fleetd serve`` on the real broker: no message body in its log even at DEBUG, and a broker that
is down is one line of fleetd's, never the broker client's noise."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

import aio_pika
import httpx
import pytest

from fleetd.inbox.codec import TYPED_MEDIA_TYPE, quarantine_queue_name, queue_name

AMQP_URL = "amqp://guest:guest@127.0.0.1:5672/"
LEAD_TOKEN = "broker-log-test-lead-token"
pytestmark = pytest.mark.amqp


def _broker() -> None:
    try:
        socket.create_connection(("127.0.0.1", 5672), timeout=1.0).close()
    except OSError:
        if os.environ.get("CI") == "true":
            pytest.fail("RabbitMQ is not reachable on 127.0.0.1:5672; CI needs it")
        pytest.skip("RabbitMQ is not reachable on 127.0.0.1:5672")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def _broker_call(lead: str, body: bytes | None) -> int:
    """Publish ``body`` into ``lead``'s inbox (when given); return its quarantine depth."""
    connection = await aio_pika.connect_robust(AMQP_URL)
    async with connection, connection.channel(publisher_confirms=True) as channel:
        if body is not None:
            message = aio_pika.Message(body, content_type=TYPED_MEDIA_TYPE, message_id="poison-1")
            await channel.default_exchange.publish(message, routing_key=queue_name(lead))
            return 0
        queue = await channel.declare_queue(quarantine_queue_name(lead), passive=True)
        return int(queue.declaration_result.message_count or 0)


async def _delete_queues(lead: str) -> None:
    connection = await aio_pika.connect_robust(AMQP_URL)
    async with connection, connection.channel() as channel:
        for name in (queue_name(lead), quarantine_queue_name(lead)):
            await channel.queue_delete(name)


def _config(tmp_path: Path, lead: str, port: int, urls: list[str]) -> Path:
    config = tmp_path / "fleetd.yaml"
    config.write_text(
        f"api:\n  host: 127.0.0.1\n  port: {port}\n"
        f"herdr:\n  socketPath: {Path(tempfile.mkdtemp(prefix='fbl')) / 'absent.sock'}\n"
        f"inbox:\n  backend: amqp\n  amqp:\n    urls: [{', '.join(urls)}]\n"
        f"leads:\n  - name: {lead}\n    agent: {lead}\n    tokenEnv: BROKER_LOG_LEAD\n",
        encoding="utf-8",
    )
    return config


def _serve(config: Path, level: str, during: Callable[[str], None]) -> str:
    """Run `fleetd serve` at ``level`` until it listens, call ``during`` with its base URL, stop
    it with SIGTERM and return everything it wrote (stdout and stderr)."""
    env = {**os.environ, "BROKER_LOG_LEAD": LEAD_TOKEN}
    serve = subprocess.Popen(
        [sys.executable, "-m", "fleetd", "serve", "--config", str(config), "--log-level", level],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    lines: list[bytes] = []
    listening = threading.Event()

    def read() -> None:
        assert serve.stdout is not None
        for line in iter(serve.stdout.readline, b""):
            lines.append(line)
            if b"listening on" in line:
                listening.set()
        listening.set()  # the process ended

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert listening.wait(timeout=30)
        assert serve.poll() is None, b"".join(lines).decode(errors="replace")
        port = config.read_text(encoding="utf-8").split("port: ", 1)[1].split()[0]
        during(f"http://127.0.0.1:{port}")
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(timeout=20)
        except subprocess.TimeoutExpired:
            serve.kill()
            serve.wait(timeout=10)
        reader.join(timeout=10)
        assert serve.stdout is not None
        serve.stdout.close()
    return b"".join(lines).decode(errors="replace")


def _poll(base: str) -> list[object]:
    with httpx.Client(timeout=10) as client:
        poll = client.post(
            f"{base}/v1/tools/fleet_poll",
            json={},
            headers={"Authorization": f"Bearer {LEAD_TOKEN}"},
        )
    assert poll.status_code == 200, poll.text
    messages = poll.json()["result"]["messages"]
    assert isinstance(messages, list)
    return messages


def test_debug_logging_never_writes_a_message_body(tmp_path: Path) -> None:
    """A poisoned entry's body, copied to quarantine by fleetd at DEBUG, is absent from its log."""
    _broker()
    lead = f"l{uuid.uuid4().hex[:12]}"
    marker = f"body-marker-{uuid.uuid4().hex}"
    config = _config(tmp_path, lead, _free_port(), [AMQP_URL])

    def during(base: str) -> None:
        asyncio.run(_broker_call(lead, f'{{"schemaVersion": 1, "x": "{marker}'.encode()))
        assert _poll(base) == []
        assert asyncio.run(_broker_call(lead, None)) == 1  # fleetd published the body

    try:
        output = _serve(config, "DEBUG", during)
    finally:
        asyncio.run(_delete_queues(lead))
    assert "DEBUG" in output  # the level really was DEBUG
    assert marker not in output
    assert "guest:guest" not in output


def test_a_broker_that_is_down_is_one_warning_and_no_library_noise(tmp_path: Path) -> None:
    """5e: the first broker refuses (a closed port) and the second serves. While fleetd keeps
    probing the first (at start, and on each call while its breaker admits), the log says once
    that broker 0 does not answer; aiormq's ERROR per probe, aio-pika's reconnect lines and its
    `RobustConnection.close was never awaited` warning never appear."""
    _broker()
    lead = f"l{uuid.uuid4().hex[:12]}"
    refused = f"amqp://guest:guest@127.0.0.1:{_free_port()}/"
    config = _config(tmp_path, lead, _free_port(), [refused, AMQP_URL])

    def during(base: str) -> None:
        for _ in range(4):  # each call on the fallback probes the primary while it may
            assert _poll(base) == []

    try:
        output = _serve(config, "INFO", during)
    finally:
        asyncio.run(_delete_queues(lead))
    for noise in (" aiormq", " aio_pika", "RuntimeWarning", "never awaited", "Traceback"):
        assert noise not in output, noise
    warnings = [line for line in output.splitlines() if "WARNING fleetd.inbox " in line]
    assert [line.split(" fleetd.inbox ", 1)[1] for line in warnings] == [
        "inbox broker 0 does not answer (refused)"
    ]
    assert "inbox connected to amqp://127.0.0.1:5672/ (broker 1)" in output


def test_the_broker_client_logs_nothing_below_critical_and_no_trace() -> None:
    """aiormq logs a chained traceback for every lost connection, and aio-pika a line for every
    reconnect; under `fleetd serve`'s logging (a fresh interpreter, as serve sets it up) nothing
    below CRITICAL is written, and a CRITICAL record is one line naming the exception class,
    without the exception's text."""
    program = (
        "import logging\n"
        "from fleetd.cli import configure_logging\n"
        "configure_logging('DEBUG')\n"
        "try:\n"
        "    raise ConnectionError('frame carrying secret-body-marker-9c1d')\n"
        "except ConnectionError:\n"
        "    for level in (logging.WARNING, logging.ERROR, logging.CRITICAL):\n"
        "        logging.getLogger('aiormq.connection').log(\n"
        "            level, 'Cancelling cause reader exited abnormally', exc_info=True)\n"
        "logging.getLogger('aio_pika.robust_connection').warning('Connection attempt failed')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True
    )
    assert "secret-body-marker-9c1d" not in done.stderr
    assert "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    assert " CRITICAL aiormq.connection " in line
    assert line.endswith("Cancelling cause reader exited abnormally (ConnectionError)")


def test_the_mcp_sdk_says_nothing_per_request() -> None:
    """The SDK logs one INFO per stateless MCP request (its session "terminating"): under
    `fleetd serve`'s logging at INFO that line is not written; the SDK's warnings still are."""
    program = (
        "import logging\n"
        "from fleetd.cli import configure_logging\n"
        "configure_logging('INFO')\n"
        "logging.getLogger('mcp.server.streamable_http').info('Terminating session: None')\n"
        "logging.getLogger('mcp.server.streamable_http').warning('a real problem')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True
    )
    [line] = done.stderr.splitlines()
    assert line.endswith(" WARNING mcp.server.streamable_http a real problem")
