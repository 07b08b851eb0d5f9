"""A TCP proxy that can freeze: it keeps accepting connections but passes nothing either way.

That is what a database behind a hung host, a stuck load balancer or a half-dead network looks
like to a client: the connection opens, the kernel acknowledges every byte, and no answer ever
comes. :meth:`FrozenProxy.thaw` lets traffic through again; connections that were open while it
was frozen are closed then (they never see an answer), new ones pass.
"""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ["FrozenProxy"]


class FrozenProxy:
    """Relays 127.0.0.1:<port> to ``upstream`` until frozen."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self._upstream = (upstream_host, upstream_port)
        self._server: asyncio.Server | None = None
        self._passing = asyncio.Event()
        self._passing.set()
        self._frozen_writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.accepted = 0

    @property
    def port(self) -> int:
        assert self._server is not None
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

    def freeze(self) -> None:
        """From now on nothing passes, on open connections and on new ones."""
        self._passing.clear()

    def thaw(self) -> None:
        """Traffic passes again; connections held while frozen are closed."""
        for writer in self._frozen_writers:
            writer.close()
        self._frozen_writers.clear()
        self._passing.set()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await task
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        if not self._passing.is_set():
            self._frozen_writers.add(writer)  # accepted, never read, never answered
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        except OSError:
            writer.close()
            return
        for source, sink, peer in ((reader, up_writer, writer), (up_reader, writer, up_writer)):
            task = asyncio.create_task(self._pipe(source, sink, peer))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pipe(
        self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, peer: asyncio.StreamWriter
    ) -> None:
        try:
            while data := await source.read(65536):
                if not self._passing.is_set():
                    self._frozen_writers.update((sink, peer))
                    return  # frozen: hold what came, pass nothing more
                sink.write(data)
                await sink.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            if self._passing.is_set():
                sink.close()
