"""Scenario files: what the simulated herd looks like and how each agent misbehaves.

A scenario is YAML (or the equivalent mapping)::

    version: 1
    server:                       # herdr-level knobs
      version: "0.8.2"            # what ping reports
      latency_seconds: 0.0        # answer every request this late ("answer slowly")
      unresponsive: false         # read requests, never answer ("stop answering")
    defaults:                     # AgentProfile fields for every agent
      turn_seconds: 3.0
    kinds:                        # per agent kind (claude, codex, opencode, ...)
      codex: {turn_seconds: 4.0}
    agents:                       # per agent name; fnmatch patterns, applied in file order
      "m-stall*": {faults: [stall]}
    existing:                     # panes present when the simulator starts
      - {name: lead, kind: claude, cwd: /tmp/lead, label: lead}
      - {shell: true, label: spare}

Profile fields (all optional): ``start_seconds`` (launch to interactive), ``react_seconds``
(prompt to ``working``), ``turn_seconds``, ``frame_seconds`` (screen refresh while working),
``instant_seconds`` (turn length under the ``instant`` fault), ``slow_start_seconds``,
``answer`` (final text; ``{name}``, ``{turn}`` and ``{prompt}`` are filled in),
``error_signature`` (which fatal screen ``error_screen`` shows), ``fault_from_turn`` (first turn
the turn faults hit) and ``faults``, a list of :class:`Fault` names. Unknown keys are refused
with a :class:`~fleetd.errors.ConfigError` naming the key, so a typo never silently does nothing.

Prompt answers (herdr's side of ``agent.prompt``): ``prompt_refusal`` is an error code answered
*before* typing (as herdr's ``agent_blocked``); ``prompt_failure`` is an error code answered *after*
the prompt and Enter were typed (as herdr's ``agent_prompt_failed`` when a write fails part way), or
``unparseable`` for an answer whose result is ``{}``. ``prompt_fault_count`` limits both to the
agent's first N ``agent.prompt`` requests (``null``, the default, is every request).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml

from fleetd.errors import ConfigError
from fleetd.herdr.model import AgentStatus
from fleetd.herdr.rules import canonical_kind, is_valid_agent_name

__all__ = [
    "AgentProfile",
    "ExistingPane",
    "Fault",
    "Scenario",
    "ServerSettings",
    "load_scenario",
    "parse_scenario",
]


class Fault(StrEnum):
    """What can go wrong with one simulated agent."""

    INSTANT = "instant"  # the turn is shorter than one 250 ms poll
    MUTE = "mute"  # finishes without delivering a reply (behaviours skip deliver_reply)
    EXIT = "exit"  # the agent process exits mid-turn: the pane is gone (*_not_found)
    ERROR_SCREEN = "error_screen"  # fatal signature on screen while status goes idle/done
    STALL = "stall"  # working forever with an unchanging screen
    BLOCKED = "blocked"  # stops at an approval prompt until someone answers it
    NEVER_READY = "never_ready"  # agent.start never reaches interactive_ready
    SLOW_START = "slow_start"  # interactive only after slow_start_seconds


TURN_FAULTS = frozenset(
    {Fault.INSTANT, Fault.MUTE, Fault.EXIT, Fault.ERROR_SCREEN, Fault.STALL, Fault.BLOCKED}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentProfile:
    """How one simulated agent behaves (times in seconds of the simulator's clock)."""

    start_seconds: float = 1.5
    react_seconds: float = 0.3
    turn_seconds: float = 3.0
    frame_seconds: float = 1.0
    instant_seconds: float = 0.1
    slow_start_seconds: float = 20.0
    answer: str = "Done: {prompt}"
    error_signature: str | None = None
    fault_from_turn: int = 1
    faults: frozenset[Fault] = frozenset()
    prompt_refusal: str | None = None
    prompt_failure: str | None = None
    prompt_fault_count: int | None = None

    def has(self, fault: Fault) -> bool:
        return fault in self.faults

    def prompt_faulted(self, request: int) -> bool:
        """Whether the prompt knobs hit ``agent.prompt`` request number ``request`` (1-based)."""
        return self.prompt_fault_count is None or request <= self.prompt_fault_count

    def turn_faults(self, turn: int) -> frozenset[Fault]:
        """The turn faults active on turn number ``turn`` (1-based)."""
        if turn < self.fault_from_turn:
            return frozenset()
        return self.faults & TURN_FAULTS


@dataclass(frozen=True, slots=True, kw_only=True)
class ExistingPane:
    """A pane the simulator starts with: an agent (``name`` + ``kind``) or a bare shell."""

    name: str | None = None
    kind: str | None = None
    cwd: str | None = None
    label: str | None = None
    status: AgentStatus = AgentStatus.IDLE
    env: Mapping[str, str] = field(default_factory=dict)
    overrides: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerSettings:
    version: str = "0.8.2"
    protocol: int = 20
    latency_seconds: float = 0.0
    unresponsive: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """A whole simulated herdr: server knobs, profiles and the panes present at start."""

    server: ServerSettings = ServerSettings()
    defaults: Mapping[str, Any] = field(default_factory=dict)
    kinds: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    agents: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    existing: tuple[ExistingPane, ...] = ()

    def profile_for(
        self, *, name: str | None, kind: str, overrides: Mapping[str, Any] | None = None
    ) -> AgentProfile:
        """defaults <- kinds[kind] <- every matching agents pattern <- ``overrides``."""
        merged: dict[str, Any] = dict(self.defaults)
        merged.update(self.kinds.get(kind, {}))
        for pattern, fields in self.agents:
            if name is not None and fnmatch.fnmatchcase(name, pattern):
                merged.update(fields)
        merged.update(overrides or {})
        return _profile(merged, "profile")


_PROFILE_FIELDS = {f.name for f in dataclasses.fields(AgentProfile)}
_CODE = re.compile(r"[a-z][a-z0-9_]{0,63}")
_EXISTING_KEYS = {"name", "kind", "cwd", "label", "status", "env", "shell"}


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(where, "must be a mapping")
    return value


def _check_profile_keys(fields: Mapping[str, Any], where: str) -> dict[str, Any]:
    for key in fields:
        if key not in _PROFILE_FIELDS:
            raise ConfigError(f"{where}.{key}", "unknown profile field")
    checked = dict(fields)
    _profile(checked, where)  # validate values early, with the key path in the error
    return checked


_SECONDS = frozenset(
    {
        "start_seconds",
        "react_seconds",
        "turn_seconds",
        "frame_seconds",
        "instant_seconds",
        "slow_start_seconds",
    }
)


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ConfigError(where, "must be a non-negative number")
    return float(value)


def _profile(fields: Mapping[str, Any], where: str) -> AgentProfile:
    values: dict[str, Any] = {}
    for key, value in fields.items():
        if key in _SECONDS:
            values[key] = _number(value, f"{where}.{key}")
        elif key == "fault_from_turn":
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{where}.{key}", "must be a turn number (1 or more)")
            values[key] = value
        elif key in ("prompt_refusal", "prompt_failure"):
            if value is not None and (not isinstance(value, str) or not _CODE.fullmatch(value)):
                raise ConfigError(f"{where}.{key}", "must be an error code like agent_blocked")
            values[key] = value
        elif key == "prompt_fault_count":
            counted = isinstance(value, int) and not isinstance(value, bool) and value >= 1
            if value is not None and not counted:
                raise ConfigError(f"{where}.{key}", "must be a count (1 or more) or null")
            values[key] = value
        elif key in ("answer", "error_signature"):
            if not isinstance(value, str) and not (key == "error_signature" and value is None):
                raise ConfigError(f"{where}.{key}", "must be a string")
            values[key] = value
        elif key == "faults":
            if isinstance(value, str) or not isinstance(value, list | tuple | set | frozenset):
                raise ConfigError(f"{where}.faults", "must be a list of fault names")
            try:
                values[key] = frozenset(Fault(f) for f in value)
            except ValueError:
                known = ", ".join(sorted(Fault))
                raise ConfigError(f"{where}.faults", f"unknown fault; known: {known}") from None
    return AgentProfile(**values)


def _server(raw: Mapping[str, Any]) -> ServerSettings:
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "latency_seconds":
            values[key] = _number(value, f"server.{key}")
        elif key == "unresponsive":
            if not isinstance(value, bool):
                raise ConfigError(f"server.{key}", "must be true or false")
            values[key] = value
        elif key == "version":
            values[key] = str(value)
        elif key == "protocol":
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"server.{key}", "must be an integer")
            values[key] = value
        else:
            raise ConfigError(f"server.{key}", "unknown server setting")
    return ServerSettings(**values)


def _existing(item: Any, index: int) -> ExistingPane:
    where = f"existing[{index}]"
    raw = _mapping(item, where)
    extra = {k: v for k, v in raw.items() if k not in _EXISTING_KEYS}
    overrides = _check_profile_keys(extra, where)
    env = {str(k): str(v) for k, v in _mapping(raw.get("env"), f"{where}.env").items()}
    status_text = str(raw.get("status", "idle"))
    status = AgentStatus.parse(status_text)
    if status.value != status_text:
        raise ConfigError(f"{where}.status", "must be idle, done, working, blocked or unknown")
    if raw.get("shell"):
        return ExistingPane(cwd=raw.get("cwd"), label=raw.get("label"), env=env)
    name, kind = raw.get("name"), raw.get("kind", "claude")
    if not isinstance(name, str) or not is_valid_agent_name(name):
        raise ConfigError(f"{where}.name", "must match [a-z][a-z0-9_-]{0,31}")
    label = canonical_kind(str(kind))
    if label is None:
        raise ConfigError(f"{where}.kind", "unknown agent kind")
    return ExistingPane(
        name=name,
        kind=label,
        cwd=raw.get("cwd"),
        label=raw.get("label"),
        status=status,
        env=env,
        overrides=overrides,
    )


def parse_scenario(data: Mapping[str, Any] | None) -> Scenario:
    """Validate a scenario mapping; every error names its key path."""
    root = _mapping(data, "scenario")
    known = {"version", "server", "defaults", "kinds", "agents", "existing"}
    for key in root:
        if key not in known:
            raise ConfigError(key, "unknown scenario key")
    if root.get("version", 1) != 1:
        raise ConfigError("version", "only version 1 is understood")
    server = _server(_mapping(root.get("server"), "server"))
    defaults = _check_profile_keys(_mapping(root.get("defaults"), "defaults"), "defaults")
    kinds = {
        str(kind): _check_profile_keys(_mapping(fields, f"kinds.{kind}"), f"kinds.{kind}")
        for kind, fields in _mapping(root.get("kinds"), "kinds").items()
    }
    agents = tuple(
        (str(pattern), _check_profile_keys(_mapping(f, f"agents.{pattern}"), f"agents.{pattern}"))
        for pattern, f in _mapping(root.get("agents"), "agents").items()
    )
    existing_raw = root.get("existing") or []
    if not isinstance(existing_raw, list):
        raise ConfigError("existing", "must be a list")
    existing = tuple(_existing(item, i) for i, item in enumerate(existing_raw))
    names = [e.name for e in existing if e.name]
    if len(names) != len(set(names)):
        raise ConfigError("existing", "agent names must be unique")
    return Scenario(server=server, defaults=defaults, kinds=kinds, agents=agents, existing=existing)


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario YAML file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError("scenario", f"cannot read file ({type(exc).__name__})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        raise ConfigError("scenario", "not valid YAML") from None
    return parse_scenario(data)
