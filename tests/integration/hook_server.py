"""A scriptable HTTP/1.1 webhook receiver on 127.0.0.1 for sender tests (asyncio streams only).

Each connection carries one request. The server records it (method, path, headers, body), then
answers with the next scripted :class:`Reply`: a status with headers, a hang (never answer), or a
reset (close with ``SO_LINGER`` 0, so the peer sees a TCP RST). With no reply scripted, ``judge``
(when set) answers from the request itself, as a receiver checking its documented shape does.
``arrived`` is set once a whole request has been read, which is how a test knows a hanging
request is in flight.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType

__all__ = ["HookServer", "Received", "Reply"]


@dataclass(frozen=True)
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    hang: bool = False
    reset: bool = False


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class HookServer:
    """Start with ``async with HookServer() as server``; script with :meth:`answer`."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.arrived = asyncio.Event()
        self.judge: Callable[[Received], Reply] | None = None
        self._replies: deque[Reply] = deque()
        self._release = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}/hooks/fleetd"

    def answer(self, *replies: Reply) -> None:
        """Queue replies for the next requests; with none queued a request gets 200."""
        self._replies.extend(replies)

    async def __aenter__(self) -> HookServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._release.set()
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        request_line, *lines = head.split("\r\n")
        method, path, _ = request_line.split(" ", 2)
        headers = {}
        for line in lines:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        received = Received(method=method, path=path, headers=headers, body=body)
        self.received.append(received)
        self.arrived.set()
        if self._replies:
            reply = self._replies.popleft()
        else:
            reply = self.judge(received) if self.judge is not None else Reply()
        if reply.hang:
            await self._release.wait()
            return
        if reply.reset:
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return
        status_line = f"HTTP/1.1 {reply.status} Scripted\r\n"
        fields = {"content-length": str(len(reply.body)), "connection": "close"} | reply.headers
        text = status_line + "".join(f"{k}: {v}\r\n" for k, v in fields.items()) + "\r\n"
        writer.write(text.encode("latin-1") + reply.body)
        await writer.drain()
