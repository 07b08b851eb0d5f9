"""A minimal HTTP/1.1 load client: keep-alive connections asking one path back to back.

It parses only the status line and ``Content-Length`` and reads the body as bytes, so the client
costs the same whatever server answers (``benchmarks/fleet_list.py`` measures two).
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field

__all__ = ["OK", "Point", "load", "median"]

OK = frozenset({200})


@dataclass(slots=True)
class Point:
    """One side at one concurrency: answers per second and latency percentiles (ms)."""

    rate: float
    p50: float
    p99: float
    statuses: dict[int, int] = field(default_factory=dict)


async def load(
    port: int,
    clients: int,
    headers: dict[str, str],
    *,
    warmup: float,
    seconds: float,
    path: str = "/v1/fleet",
    statuses_allowed: frozenset[int] = OK,
) -> Point:
    """``clients`` keep-alive connections asking ``GET path`` back to back for ``seconds`` after
    ``warmup``; every answer's status must be one of ``statuses_allowed``."""
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    request = f"GET {path} HTTP/1.1\r\nHost: bench\r\n{head}\r\n".encode()
    begin = time.perf_counter() + warmup
    end = begin + seconds
    latencies: list[float] = []
    statuses: Counter[int] = Counter()

    async def client() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while (sent := time.perf_counter()) < end:
                writer.write(request)
                header = await reader.readuntil(b"\r\n\r\n")
                status, length = _status_and_length(header)
                if length:
                    await reader.readexactly(length)
                if sent >= begin:
                    latencies.append(time.perf_counter() - sent)
                    statuses[status] += 1
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    await asyncio.gather(*(client() for _ in range(clients)))
    if not statuses.keys() <= statuses_allowed:
        raise RuntimeError(f"answers with statuses {dict(statuses)}")
    latencies.sort()
    return Point(
        rate=len(latencies) / seconds,
        p50=statistics.median(latencies) * 1000,
        p99=latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
        statuses=dict(statuses),
    )


def median(points: list[Point]) -> Point:
    """The median of each figure over repeated measurements."""
    return Point(
        statuses={},
        rate=statistics.median(p.rate for p in points),
        p50=statistics.median(p.p50 for p in points),
        p99=statistics.median(p.p99 for p in points),
    )


def _status_and_length(header: bytes) -> tuple[int, int]:
    lines = header.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            return status, int(value.strip())
    return status, 0
