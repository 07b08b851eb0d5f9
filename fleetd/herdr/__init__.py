"""herdr: the terminal-native agent multiplexer fleetd drives, and fleetd's side of its socket.

* :mod:`fleetd.herdr.protocol` — pure frames: requests, responses, error classification and
  typed results (:mod:`~fleetd.herdr.model`);
* :mod:`fleetd.herdr.calls` — one builder per herdr method;
* :mod:`fleetd.herdr.rules` — herdr's input rules (agent names, kinds, start timeouts, keys)
  that fleetd, its fake and the simulator share;
* :mod:`fleetd.herdr.discovery` — where the socket is;
* :mod:`fleetd.herdr.client` — :class:`HerdrSocketClient`, the asyncio adapter, with its
  deadlines on the injected clock (:mod:`~fleetd.herdr.deadline`);
* :mod:`fleetd.herdr.control` — the :class:`AgentControl` port and :class:`HerdrAgentControl`;
* :mod:`fleetd.herdr.fake` — :class:`~fleetd.herdr.fake.FakeAgentControl`, the port's fake for
  tests (and :mod:`fleetd.testing`); not imported here, so the service never loads it.

herdr's pushed events, the typed wrapper per herdr method and the ``events.subscribe``
connection are used only by the tests and the simulator, so they live there:
:mod:`fleetd.sim.events`, :mod:`fleetd.sim.client` and :mod:`fleetd.sim.event_stream`.

Importing this package opens nothing and starts nothing.
"""

from __future__ import annotations

from fleetd.herdr.calls import PromptWait
from fleetd.herdr.client import HerdrSocketClient
from fleetd.herdr.control import AgentControl, HerdrAgentControl
from fleetd.herdr.discovery import resolve_socket_path
from fleetd.herdr.model import (
    AgentInfo,
    AgentStarted,
    AgentStatus,
    PaneInfo,
    Pong,
    ProcessInfo,
    ReadResult,
    ReadSource,
    SessionSnapshot,
    SplitDirection,
    TabCreated,
    WorkspaceCreated,
)

__all__ = [
    "AgentControl",
    "AgentInfo",
    "AgentStarted",
    "AgentStatus",
    "HerdrAgentControl",
    "HerdrSocketClient",
    "PaneInfo",
    "Pong",
    "ProcessInfo",
    "PromptWait",
    "ReadResult",
    "ReadSource",
    "SessionSnapshot",
    "SplitDirection",
    "TabCreated",
    "WorkspaceCreated",
    "resolve_socket_path",
]
