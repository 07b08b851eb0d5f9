"""A webhook receiver in a process of its own, for the kill -9 tests of ``fleetd serve``.

Run as ``python -m tests.integration.stalling_receiver --log PATH [--stall N] [--hold N]``. It
listens on 127.0.0.1 (a free port), prints its URL on one stdout line, and appends one JSON line
per request to ``PATH`` as soon as the whole request is read and before it answers: method, path,
headers, body and ``at`` (``time.time()``). Every other request gets 200.

* ``--stall N``: the first ``N`` requests are never answered (the connection is held until the
  peer goes away).
* ``--hold N``: the first ``N`` requests are held until either a line on stdin names the
  request's ``webhook-id`` — then it is answered 200 and ``{"answered": id, "at": ...}`` is
  logged once the answer is written — or the peer goes away first — then
  ``{"abandoned": id, "at": ...}`` is logged. So a test decides, per request, whether the sender
  dies with its request unanswered or after a 2xx it has not recorded yet. Only held requests
  log those lines.

It verifies and deduplicates nothing: the test reads the log.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any


class _Receiver:
    def __init__(self, log: Path, stall: int, hold: int) -> None:
        self._log = log
        self._stall = stall
        self._hold = hold
        self._seen = 0
        self._released: dict[str, asyncio.Event] = {}

    def release(self, webhook_id: str) -> None:
        """Answer the held request ``webhook_id`` (now, or as soon as it arrives)."""
        self._released.setdefault(webhook_id, asyncio.Event()).set()

    def _write(self, entry: dict[str, Any]) -> None:
        with self._log.open("a", encoding="utf-8") as log:
            log.write(json.dumps({**entry, "at": time.time()}) + "\n")

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, ValueError):
            await self._serve(reader, writer)
        writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        request_line, *lines = head.split("\r\n")
        method, path, _ = request_line.split(" ", 2)
        headers: dict[str, str] = {}
        for line in lines:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        self._seen += 1
        seen = self._seen
        self._write({"method": method, "path": path, "headers": headers, "body": body.decode()})
        if seen <= self._stall:
            await reader.read()  # held, unanswered, until the sender goes away
            return
        webhook_id = headers.get("webhook-id", "")
        held = seen <= self._stall + self._hold
        if held:
            released = self._released.setdefault(webhook_id, asyncio.Event())
            waits = [asyncio.ensure_future(released.wait()), asyncio.ensure_future(reader.read())]
            done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
            for task in done:  # a reset peer ends the read with an error: it went away too
                task.exception()
            if waits[0] not in done:  # the sender went away first
                self._write({"abandoned": webhook_id})
                return
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        await writer.drain()
        if held:
            self._write({"answered": webhook_id})


async def _releases(receiver: _Receiver) -> None:
    """Each stdin line names a held request's webhook-id to answer."""
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    while line := await stdin.readline():
        receiver.release(line.decode().strip())


async def _run(log: Path, stall: int, hold: int) -> None:
    receiver = _Receiver(log, stall, hold)
    server = await asyncio.start_server(receiver.handle, "127.0.0.1", 0)
    host, port = server.sockets[0].getsockname()[:2]
    sys.stdout.write(f"http://{host}:{port}/hooks/fleetd\n")
    sys.stdout.flush()
    releases = asyncio.ensure_future(_releases(receiver)) if hold else None
    async with server:
        await server.serve_forever()
    if releases is not None:
        releases.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.integration.stalling_receiver")
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--stall", type=int, default=0)
    parser.add_argument("--hold", type=int, default=0)
    args = parser.parse_args()
    asyncio.run(_run(args.log, args.stall, args.hold))


if __name__ == "__main__":
    main()
