"""Running the service: ``fleetd serve``'s server, the watch on its instance's lock, and the
standby that waits for that lock.

:func:`serve` builds the service, takes back what the state store holds, binds ``api.port`` and
serves until SIGINT/SIGTERM (SIGHUP asks for a config reload). While it serves, the instance's
lock is checked as often as a standby tries it (:func:`standby_poll`); serving stops when the
lock went to another process, or when another process that started earlier renews the
instance's row in the shared journal (``fleetd serve`` exits 3). :func:`wait_as_standby` answers
on ``api.standbyPort`` while another process holds the instance and returns once it holds the
lock itself. The command line around them is :mod:`fleetd.cli`.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import socket
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import uvicorn

from fleetd.serving.connections import bounded_protocol, descriptor_cap

if TYPE_CHECKING:
    from fleetd.config import ConfigRef
    from fleetd.state.lock import InstanceLock
    from fleetd.state.opening import OpenedState
    from fleetd.state.port import StateStore

__all__ = ["serve", "standby_poll", "wait_as_standby", "wait_for_port"]


def _connection_bound(ref: ConfigRef) -> Callable[[], int]:
    """The most connections ``fleetd serve`` holds: ``api.maxConnections`` (hot), and never
    more than half the open-file limit (said once at start when that is lower)."""
    cap = descriptor_cap()
    configured = ref.current.api.max_connections
    if cap is not None and configured > cap:
        logging.getLogger("fleetd").info(
            "api.maxConnections is %d, but half the open-file limit is %d: at most %d "
            "connections are held (raise the limit, ulimit -n, to hold more)",
            configured,
            cap,
            cap,
        )

    def bound() -> int:
        most = ref.current.api.max_connections
        return most if cap is None else min(most, cap)

    return bound


async def serve(
    ref: ConfigRef, *, state: StateStore | None = None, lock: InstanceLock | None = None
) -> bool:
    """Serve one fleetd until SIGINT/SIGTERM; SIGHUP asks for a config reload. What the state
    store holds is taken back before the port is bound: a store that cannot be read raises
    :class:`~fleetd.errors.StateStoreError` here (``fleetd serve`` exits 2 naming it). The
    instance's ``lock`` is checked as often as a standby tries it: ``False`` when it went to
    another process and serving stopped for it, or when another process that started earlier
    renews this instance's row in the shared journal (``fleetd serve`` exits 3)."""
    from fleetd.api.app import create_app  # noqa: PLC0415
    from fleetd.compose import build_service  # noqa: PLC0415

    service = build_service(ref, environ=dict(os.environ), state=state)
    await service.restore()
    app = create_app(service)
    api = ref.current.api
    server = _Server(
        uvicorn.Config(
            app,
            host=api.host,
            port=api.port,
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=_GRACEFUL_SECONDS,
            http=bounded_protocol(_connection_bound(ref)),
        ),
        on_exit=service.stop_requested,
    )
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError):
        loop.add_signal_handler(signal.SIGHUP, ref.request_reload)
        for stop in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(stop, server.request_exit)
    kept = asyncio.Event()
    kept.set()

    def displaced(_other: object) -> None:  # another live process serves this instance's name
        kept.clear()
        server.should_exit = True

    service.instances.on_displaced = displaced
    holding = asyncio.create_task(_keep_lock(ref, lock, server, kept)) if lock else None
    try:
        await server.serve()
    finally:
        if holding is not None:
            holding.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await holding
    logging.getLogger("fleetd").info("stopped")
    return kept.is_set()


async def _keep_lock(
    ref: ConfigRef, lock: InstanceLock, server: uvicorn.Server, kept: asyncio.Event
) -> None:
    """Check the instance's lock every :func:`standby_poll` seconds; if another process took it
    (this one's connection had died), clear ``kept`` and stop serving: one writer per instance."""
    from fleetd.clock import SystemClock  # noqa: PLC0415
    from fleetd.errors import StateStoreError  # noqa: PLC0415
    from fleetd.state.lock import LockCheck  # noqa: PLC0415

    log = logging.getLogger("fleetd")
    failing = False
    pending: asyncio.Future[LockCheck] | None = None
    while True:
        await asyncio.sleep(standby_poll(ref))
        if pending is None or pending.done():  # a check stuck in its thread is never doubled
            if pending is not None and not pending.cancelled():
                pending.exception()  # a late answer of a check that timed out: read, dropped
            pending = asyncio.ensure_future(asyncio.to_thread(lock.check, SystemClock().now()))
        try:
            found = await asyncio.wait_for(
                asyncio.shield(pending),
                timeout=ref.current.state.operation_timeout.total_seconds() * 2,
            )
        except (StateStoreError, TimeoutError) as exc:
            if not failing:
                log.warning("state store: the writer lock cannot be checked now (%s)", exc)
            failing = True
            continue
        failing = False
        if found is LockCheck.RETAKEN:
            log.warning(
                "state store: the writer lock of instance %r went with its database connection "
                "and is held again",
                lock.instance,
            )
        elif found is LockCheck.LOST:
            log.error(
                "state store: instance %r is held by another process now (its lock went with "
                "this one's database connection): stopping, so that one writer serves it",
                lock.instance,
            )
            kept.clear()
            server.should_exit = True
            return


def wait_for_port(host: str, port: int, seconds: float) -> None:
    """Wait up to ``seconds`` for ``host:port`` to be free to listen on (a holder that lost the
    lock to this standby is stopping); past that, the bind says what is wrong."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError:
                time.sleep(0.2)
                continue
        return


def standby_poll(ref: ConfigRef) -> float:
    """Seconds between a standby's tries of the lock: a sixth of the snapshot interval (hot), so
    a take-over (a try, then a start) fits in two intervals with room for the start."""
    return ref.current.health.snapshot_interval.total_seconds() / 6


async def wait_as_standby(ref: ConfigRef, state: OpenedState) -> bool:
    """Serve the standby's answers on ``api.standbyPort`` and try the instance's lock every
    :func:`standby_poll` seconds; ``True`` once it holds the lock (then :func:`serve` binds
    ``api.port``, which the dead holder's members call), ``False`` when SIGTERM/SIGINT ends the
    wait first."""
    from fleetd.api import StandbyHolder, create_standby_app  # noqa: PLC0415
    from fleetd.clock import SystemClock  # noqa: PLC0415
    from fleetd.errors import StateStoreError  # noqa: PLC0415

    log = logging.getLogger("fleetd")
    clock = SystemClock()
    holder: StandbyHolder | None = None

    def refresh() -> None:
        nonlocal holder
        found = state.lock.holder()
        holder = (
            StandbyHolder(pid=found.pid, host=found.host, started_at=found.started_at)
            if found is not None
            else None
        )

    await asyncio.to_thread(refresh)
    api = ref.current.api
    server = _StandbyServer(
        uvicorn.Config(
            create_standby_app(state.lock.instance, lambda: holder),
            host=api.host,
            port=api.standby_listen_port,
            log_level="warning",
            lifespan="off",
        )
    )
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError):
        for stop in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(stop, stopping.set)
    serving = asyncio.create_task(server.serve())
    held_by = f"pid {holder.pid} on {holder.host}" if holder is not None else "another process"
    log.info(
        "standby on http://%s:%s: instance %r is held by %s; trying its lock every %.1f s",
        api.host,
        api.standby_listen_port,
        state.lock.instance,
        held_by,
        standby_poll(ref),
    )
    taken = False
    failing = False
    try:
        while not stopping.is_set():
            try:  # a database that is away is waited out, never a reason to stop waiting
                taken = await asyncio.to_thread(state.take_over, clock.now())
                if taken:
                    break
                await asyncio.to_thread(refresh)
            except StateStoreError as exc:
                if not failing:
                    log.warning("standby: the state store cannot be asked (%s); still waiting", exc)
                failing = True
            else:
                if failing:
                    log.info("standby: the state store answers again; still waiting")
                failing = False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), timeout=standby_poll(ref))
    finally:
        server.should_exit = True
        await serving
        with contextlib.suppress(NotImplementedError):
            for stop in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(stop)
    if taken:
        log.warning("took over instance %r: loading the state store", state.lock.instance)
    else:
        log.info("standby stopped before taking over")
    return taken


class _StandbyServer(uvicorn.Server):
    """uvicorn for the standby's answers; the wait owns the signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


#: How long a stop waits for open requests (sync waiters are let go at once; this bounds the rest).
_GRACEFUL_SECONDS = 10


class _Server(uvicorn.Server):
    """uvicorn whose signals fleetd owns: SIGTERM and SIGINT stop it, and the exit status is 0."""

    def __init__(self, config: uvicorn.Config, *, on_exit: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_exit = on_exit

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    def request_exit(self) -> None:
        self._on_exit()
        self.should_exit = True

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            from fleetd.runtime import freeze_startup_heap  # noqa: PLC0415

            frozen = freeze_startup_heap()  # the service is up: what it built stays
            logging.getLogger("fleetd").info(
                "start-up heap frozen (%d objects); young collections every %d allocations",
                frozen,
                gc.get_threshold()[0],
            )
            config = self.config
            logging.getLogger("fleetd").info("listening on http://%s:%s", config.host, config.port)
