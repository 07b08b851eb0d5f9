"""A webhook receiver in a process of its own, for the kill -9 test of ``fleetd serve``.

Run as ``python -m tests.integration.stalling_receiver --log PATH [--stall N]``. It listens on
127.0.0.1 (a free port), prints its URL on one stdout line, and appends one JSON line per request
to ``PATH`` as soon as the whole request is read and before it answers: method, path, headers and
body. The first ``N`` requests are never answered (the connection is held until the peer goes
away); every other one gets 200. It verifies and deduplicates nothing: the test reads the log.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from pathlib import Path


class _Receiver:
    def __init__(self, log: Path, stall: int) -> None:
        self._log = log
        self._stall = stall
        self._seen = 0

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
        entry = {"method": method, "path": path, "headers": headers, "body": body.decode()}
        with self._log.open("a", encoding="utf-8") as log:
            log.write(json.dumps(entry) + "\n")
        if self._seen <= self._stall:
            await reader.read()  # held, unanswered, until the sender goes away
            return
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        await writer.drain()


async def _run(log: Path, stall: int) -> None:
    receiver = _Receiver(log, stall)
    server = await asyncio.start_server(receiver.handle, "127.0.0.1", 0)
    host, port = server.sockets[0].getsockname()[:2]
    sys.stdout.write(f"http://{host}:{port}/hooks/fleetd\n")
    sys.stdout.flush()
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.integration.stalling_receiver")
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--stall", type=int, default=0)
    args = parser.parse_args()
    asyncio.run(_run(args.log, args.stall))


if __name__ == "__main__":
    main()
