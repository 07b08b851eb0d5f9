"""Runs of fleetd: which process an id was handed out by.

Every start of fleetd is one *run*, named by a short random id (``r`` and eight hex digits).
Ticket ids end in the run id (``t3-a1b2c3-r0f1e2d3c``) and member tokens begin with it
(``r0f1e2d3c.<secret>``), so that after a restart fleetd can tell an id of a run that is over
apart from one that never existed, and say which it is: a lead asking for a ticket of a previous
run learns that fleetd restarted, that the results of that run are gone and that nothing was
replayed; a member presenting a token of a previous run learns the same instead of a bare 401.

The run id is not a secret and grants nothing: a token of a previous run authenticates no one,
the run id only chooses the clearer error. The recent run ids are kept one per line, newest last,
in ``<state root>/.fleetd-runs`` (at most :data:`RUNS_KEPT`); an id of a run older than that reads
as one that never existed.

:class:`Runs` is the live value; :func:`remember_run` is its one filesystem step (blocking: async
callers run it with ``asyncio.to_thread``).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from fleetd.errors import FleetdError

__all__ = [
    "RUNS_FILE",
    "RUNS_KEPT",
    "Runs",
    "new_run_id",
    "remember_run",
    "run_of_ticket",
    "run_of_token",
    "ticket_id",
    "ticket_number",
]

RUNS_FILE = ".fleetd-runs"
RUNS_KEPT = 64
_RUN = re.compile(r"r[0-9a-f]{8}")


def new_run_id() -> str:
    """A fresh run id."""
    return f"r{secrets.token_hex(4)}"


def ticket_id(run: str, number: int, nonce: str) -> str:
    """The id of ticket ``number`` of ``run``."""
    return f"t{number}-{nonce}-{run}"


def run_of_ticket(ticket: str) -> str | None:
    """The run a ticket id names, or None when it names none."""
    run = ticket.rsplit("-", 1)[-1]
    return run if _RUN.fullmatch(run) else None


def ticket_number(ticket: str) -> int | None:
    """The sequence number a ticket id carries, or None when it carries none."""
    head = ticket.split("-", 1)[0]
    digits = head[1:]
    numbered = head[:1] == "t" and digits.isascii() and digits.isdigit() and len(digits) < 19
    return int(digits) if numbered else None


def run_of_token(token: str) -> str | None:
    """The run a member token names, or None when it names none."""
    run, dot, _secret = token.partition(".")
    return run if dot and _RUN.fullmatch(run) else None


@dataclass(slots=True)
class Runs:
    """This run's id and the ids of the recent runs before it."""

    current: str = field(default_factory=new_run_id)
    previous: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if not _RUN.fullmatch(self.current):
            raise ValueError("a run id is 'r' and eight hex digits")

    def ended(self, run: str | None) -> bool:
        """True for the id of a recent run that is over (never this one)."""
        return run is not None and run != self.current and run in self.previous


def remember_run(root: Path, run: str) -> frozenset[str]:
    """Record ``run`` as the newest run under ``root``; returns the runs recorded before it.

    Raises :class:`~fleetd.errors.FleetdError` when the file cannot be written; the caller goes
    on without knowing its previous runs (their ids then read as never issued).
    """
    path = root / RUNS_FILE
    try:
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        text = ""
    except (OSError, UnicodeDecodeError) as exc:
        raise FleetdError(f"{RUNS_FILE}: unreadable") from exc
    earlier = [line for line in text.split() if _RUN.fullmatch(line) and line != run]
    kept = [*earlier, run][-RUNS_KEPT:]
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=root, prefix=f"{RUNS_FILE}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="ascii") as handle:
                handle.write("\n".join(kept) + "\n")
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as exc:
        raise FleetdError(f"{RUNS_FILE}: not written") from exc
    return frozenset(earlier)
