"""``fleetd serve --log-level DEBUG`` on the real broker never writes a message body to its log."""

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
from pathlib import Path

import aio_pika
import httpx
import pytest

from fleetd.inbox.codec import TYPED_MEDIA_TYPE, quarantine_queue_name, queue_name

AMQP_URL = "amqp://guest:guest@127.0.0.1:5672/"
LEAD_TOKEN = "broker-log-test-lead-token"
pytestmark = pytest.mark.amqp
DEBUG = ("--log-level", "DEBUG")


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


def test_debug_logging_never_writes_a_message_body(tmp_path: Path) -> None:
    """A poisoned entry's body, copied to quarantine by fleetd at DEBUG, is absent from its log."""
    _broker()
    lead = f"l{uuid.uuid4().hex[:12]}"
    marker = f"body-marker-{uuid.uuid4().hex}"
    port = _free_port()
    config = tmp_path / "fleetd.yaml"
    config.write_text(
        f"api:\n  host: 127.0.0.1\n  port: {port}\n"
        f"herdr:\n  socketPath: {Path(tempfile.mkdtemp(prefix='fbl')) / 'absent.sock'}\n"
        f"inbox:\n  backend: amqp\n  amqp:\n    url: {AMQP_URL}\n"
        f"leads:\n  - name: {lead}\n    agent: {lead}\n    tokenEnv: BROKER_LOG_LEAD\n",
        encoding="utf-8",
    )
    env = {**os.environ, "BROKER_LOG_LEAD": LEAD_TOKEN}
    serve = subprocess.Popen(
        [sys.executable, "-m", "fleetd", "serve", "--config", str(config), *DEBUG],
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
        base = f"http://127.0.0.1:{port}"
        asyncio.run(_broker_call(lead, f'{{"schemaVersion": 1, "x": "{marker}'.encode()))
        with httpx.Client(timeout=10) as client:
            poll = client.post(
                f"{base}/v1/tools/fleet_poll",
                json={},
                headers={"Authorization": f"Bearer {LEAD_TOKEN}"},
            )
        assert poll.status_code == 200, poll.text
        assert poll.json()["result"]["messages"] == []
        assert asyncio.run(_broker_call(lead, None)) == 1  # fleetd published the body
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(timeout=20)
        except subprocess.TimeoutExpired:
            serve.kill()
            serve.wait(timeout=10)
        asyncio.run(_delete_queues(lead))
        reader.join(timeout=10)
        assert serve.stdout is not None
        serve.stdout.close()
    output = b"".join(lines).decode(errors="replace")
    assert "DEBUG" in output  # the level really was DEBUG
    assert marker not in output
    assert "guest:guest" not in output


def test_a_lost_broker_connection_is_one_log_line_without_its_trace() -> None:
    """aiormq logs a chained traceback for every lost connection; under `fleetd serve`'s logging
    (a fresh interpreter, as serve sets it up) it is one line naming the exception class, and the
    exception's text is not written."""
    program = (
        "import logging\n"
        "from fleetd.cli import configure_logging\n"
        "configure_logging('INFO')\n"
        "try:\n"
        "    raise ConnectionError('frame carrying secret-body-marker-9c1d')\n"
        "except ConnectionError:\n"
        "    logging.getLogger('aiormq.connection').warning(\n"
        "        'Cancelling cause reader exited abnormally', exc_info=True)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True
    )
    assert "secret-body-marker-9c1d" not in done.stderr
    assert "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    assert line.endswith("Cancelling cause reader exited abnormally (ConnectionError)")
