"""``health.includePaneExcerpt``: the last health read of a pane, shown to the lead it concerns.

With the key on, each successful health pane read (the budgeted probes of
:class:`~fleetd.runtime.dispatch.EffectDispatcher`, at most two per tick) keeps a redacted tail of
the screen for its target (:func:`fleetd.screens.excerpt.pane_excerpt`, with the secrets the
running config names taken out too). When a health record for an incident about that target goes
to a lead — its owner, or a peer standing in — the record's text ends with the excerpt, under a
marker that says what it is, how old, and that it was redacted and clipped.

Only a lead's inbox record gets it. The incident itself, the journal, the webhook payload, the
fleet view, metrics and logs never do: the excerpt is added to the record after it was built
from the incident, and is kept nowhere else (M4 §10.5, invariant 5). With the key off (the
default) nothing is kept, and turning it off drops what was kept. An excerpt older than
:data:`EXCERPT_MAX_AGE` is not shown: a later record would show a screen that may have changed
since. At most :data:`EXCERPTS_KEPT` targets' excerpts are kept, the oldest read going first.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from fleetd.health.incidents import Incident
from fleetd.inbox.records import InboxRecord
from fleetd.screens.excerpt import PANE_EXCERPT_CHARS, pane_excerpt

__all__ = ["EXCERPTS_KEPT", "EXCERPT_MAX_AGE", "PaneExcerpts", "excerpt_marker"]

EXCERPT_MAX_AGE: Final = timedelta(minutes=10)
"""An excerpt read longer ago than this is not added to a record. Compiled."""

EXCERPTS_KEPT: Final = 256
"""Most targets whose last excerpt is kept."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Kept:
    text: str
    clipped: bool
    read_at: datetime
    reason: str


def excerpt_marker(target: str, *, age: timedelta, reason: str, clipped: bool) -> str:
    """The line above an excerpt: what it is, where it came from, what was done to it."""
    seconds = max(0, int(age.total_seconds()))
    cut = f"only its last {PANE_EXCERPT_CHARS} characters, " if clipped else ""
    return (
        f"[pane excerpt - {target}'s screen as fleetd's health check read it {seconds} s before "
        f"this record ({reason}); {cut}secrets and URLs redacted. It is shown to this lead only, "
        "never to a person, and may be partial or out of date.]"
    )


class PaneExcerpts:
    """The last redacted excerpt of each target's pane, while ``enabled()`` says so."""

    __slots__ = ("_enabled", "_kept", "_known")

    def __init__(
        self, *, enabled: Callable[[], bool], known: Callable[[], tuple[str, ...]]
    ) -> None:
        self._enabled = enabled
        self._known = known
        self._kept: OrderedDict[str, _Kept] = OrderedDict()

    def __len__(self) -> int:
        return len(self._kept)

    def note(self, target: str, text: str, *, read_at: datetime, reason: str) -> None:
        """Keep the excerpt of one successful health read of ``target``'s pane (if enabled)."""
        if not self._enabled():
            self._kept.clear()
            return
        excerpt = pane_excerpt(text, known=self._known())
        self._kept.pop(target, None)
        self._kept[target] = _Kept(
            text=excerpt.text, clipped=excerpt.clipped, read_at=read_at, reason=reason
        )
        while len(self._kept) > EXCERPTS_KEPT:
            self._kept.popitem(last=False)

    def attach(self, record: InboxRecord, incident: Incident, *, now: datetime) -> InboxRecord:
        """``record`` with the excerpt of ``incident``'s target appended to its text, when the key
        is on and a recent one is kept; otherwise ``record`` itself."""
        if not self._enabled():
            self._kept.clear()
            return record
        target = incident.target
        kept = self._kept.get(target) if target is not None else None
        if target is None or kept is None or not kept.text:
            return record
        age = now - kept.read_at
        if age > EXCERPT_MAX_AGE:
            return record
        marker = excerpt_marker(target, age=age, reason=kept.reason, clipped=kept.clipped)
        return dataclasses.replace(record, content=f"{record.content}\n\n{marker}\n{kept.text}")
