"""Tested, agent-specific fatal signatures (ERROR_ON_SCREEN, M4 §4.2).

herdr reports a dead or errored agent as ``idle``, so health looks at the screen itself; but
arbitrary pane text cannot classify arbitrary errors, and a bare ``Exception``, ``Traceback`` or
``429`` proves nothing (the assistant may be quoting a test run). A signature therefore needs the
agent's own structure *and* a literal phrase from ``shared/agents/SCREENS.md``:

- turn signatures match only the agent's message that ends the current turn (a Claude ``⏺ API
  Error`` line or orphan ``⎿`` result, a Codex ``■`` cell, an OpenCode error box right above a
  duration-less footer), anchored at the start of that message — never tool output, never
  assistant prose, never an earlier turn;
- crash signatures match only below the agent's last chrome line, i.e. once the TUI is gone;
- retry lines (``Retrying in …``, ``Reconnecting... n/5``, ``[retrying … attempt #n]``) are
  working, not fatal, and never match.

Messages are compared with whitespace removed, so hard-wrapped lines (even split inside a JSON
token) match. Ids are stable codes: they go into incident fingerprints, so never rename one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from fleetd.screens.blocks import Role, squash
from fleetd.screens.extract import last_block, read_turn
from fleetd.screens.kinds import AgentKind
from fleetd.screens.signatures import CRASH_RULES, TURN_RULES, CrashRule

__all__ = ["FatalSignature", "match_fatal", "signature_ids"]

_RETRYING = re.compile(r"(?i)retryingin|reconnecting\.\.\.\d|attempt#?\d")


@dataclass(frozen=True, slots=True, kw_only=True)
class FatalSignature:
    """A recognised fatal screen: ``id`` is a stable code, ``summary`` our own words (no pane text).

    ``transient`` is true when the agent is usable again after a wait (overload, network, rate
    limit): the turn is dead but a later prompt may succeed. Otherwise a person or the lead must act
    (log in, add credit, compact, wait for a usage reset, restart a crashed TUI).
    """

    id: str
    kind: AgentKind
    summary: str
    transient: bool


def signature_ids(kind: AgentKind) -> tuple[str, ...]:
    """Every signature id ``match_fatal`` can return for ``kind``, in matching order."""
    crash = [rule.id for rule in CRASH_RULES.get(kind, ())]
    turn = [rule.id for rule in TURN_RULES.get(kind, ())]
    return tuple(dict.fromkeys(crash + turn))


def _crash(kind: AgentKind, tail: Sequence[str]) -> FatalSignature | None:
    rules: tuple[CrashRule, ...] = CRASH_RULES.get(kind, ())
    for rule in rules:
        for index, line in enumerate(tail):
            if not rule.first.match(line):
                continue
            window = tail[index + 1 : index + 1 + rule.window]
            if rule.then is None or any(rule.then.search(after) for after in window):
                return FatalSignature(
                    id=rule.id, kind=kind, summary=rule.summary, transient=rule.transient
                )
    return None


def match_fatal(kind: AgentKind, screen_text: str) -> FatalSignature | None:
    """The fatal signature ``screen_text`` shows for ``kind``, or ``None``."""
    view = read_turn(kind, screen_text)
    crashed = _crash(kind, view.tail)
    if crashed is not None:
        return crashed
    block = last_block(view)
    if block is None or block.role is not Role.MESSAGE:
        return None
    message = squash("\n".join(block.lines))
    if _RETRYING.search(message):
        return None
    for rule in TURN_RULES.get(kind, ()):
        if any(pattern.match(message) for pattern in rule.patterns):
            return FatalSignature(
                id=rule.id, kind=kind, summary=rule.summary, transient=rule.transient
            )
    return None
