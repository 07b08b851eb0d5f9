"""Model health: the catalog probe's schedule, its fail-open verdict, and benching.

Theory of operation
-------------------
A profile pins a model on a provider; providers retire and rename ids. The proactive probe asks
the provider's catalog — one free ``GET {base}/models``, never a billed completion — whether the
id is still listed. Three pure parts:

* :class:`ProbeSchedule` — at most one probe per provider per :data:`PROBE_FLOOR` (five minutes),
  counted from the probe's *start*, so a failed or slow fetch does not earn an early retry. A
  configured interval below the floor is raised to it.
* :func:`judge` — the verdict is **fail-open**: ``UNAVAILABLE`` only when a successfully fetched,
  non-empty catalog omits the model. A failed fetch (transport error, timeout, 401/403, 429,
  5xx, any other status, an unreadable body), a provider the probe does not cover and a probe that
  has not run yet are all ``UNKNOWN``, which never benches: every agent of a fleet shares its
  provider, and benching on an error would turn one provider hiccup into a total outage. An empty
  catalog is read the same way — it says nothing about one model.
* :class:`Bench` — an ``UNAVAILABLE`` verdict benches the profile until a deadline that escalates
  with consecutive strikes (5 min, 10, 20, 40, capped at 1 h by default). The bench clears on
  expiry only; a verdict during a standing bench does not extend it. ``AVAILABLE`` resets the
  strike count, so the next outage starts from the short cooldown again; ``UNKNOWN`` changes
  nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from types import MappingProxyType

from fleetd.resilience.budget import doubled
from fleetd.resilience.catalog import Catalog
from fleetd.resilience.classify import ErrorClass

__all__ = [
    "PROBE_FLOOR",
    "Availability",
    "Bench",
    "BenchPolicy",
    "CatalogFetch",
    "ModelVerdict",
    "ProbeSchedule",
    "VerdictReason",
    "judge",
]

PROBE_FLOOR = timedelta(minutes=5)
"""No provider's catalog is fetched more often than this, whatever the configuration says."""


class Availability(StrEnum):
    AVAILABLE = "available"
    UNAVAILABLE = "unavailable"
    UNKNOWN = "unknown"


class VerdictReason(StrEnum):
    LISTED = "listed"
    OMITTED = "omitted"
    EMPTY_CATALOG = "empty_catalog"
    FETCH_FAILED = "fetch_failed"
    NOT_RUN = "not_run"
    NOT_COVERED = "not_covered"


@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogFetch:
    """How one catalog fetch ended: a parsed catalog, or the class of its failure."""

    catalog: Catalog | None = None
    error: ErrorClass | None = None

    def __post_init__(self) -> None:
        if (self.catalog is None) == (self.error is None):
            raise ValueError("a catalog fetch has either a catalog or an error")


@dataclass(frozen=True, slots=True)
class ModelVerdict:
    availability: Availability
    reason: VerdictReason


def judge(model: str, fetch: CatalogFetch | None, *, covered: bool = True) -> ModelVerdict:
    """Whether the provider serves ``model``, per its last catalog fetch (fail-open)."""
    if not covered:
        return ModelVerdict(Availability.UNKNOWN, VerdictReason.NOT_COVERED)
    if fetch is None:
        return ModelVerdict(Availability.UNKNOWN, VerdictReason.NOT_RUN)
    if fetch.catalog is None:
        return ModelVerdict(Availability.UNKNOWN, VerdictReason.FETCH_FAILED)
    if fetch.catalog.lists(model):
        return ModelVerdict(Availability.AVAILABLE, VerdictReason.LISTED)
    if not fetch.catalog.entries:
        return ModelVerdict(Availability.UNKNOWN, VerdictReason.EMPTY_CATALOG)
    return ModelVerdict(Availability.UNAVAILABLE, VerdictReason.OMITTED)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeSchedule:
    """When each provider's catalog was last probed; ``started``: provider -> probe start."""

    interval: timedelta = PROBE_FLOOR
    started: Mapping[str, datetime] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "started", MappingProxyType(dict(self.started)))

    @property
    def floor(self) -> timedelta:
        """The interval actually kept: the configured one, never below :data:`PROBE_FLOOR`."""
        return max(self.interval, PROBE_FLOOR)

    def due_at(self, provider: str) -> datetime | None:
        """When ``provider`` may be probed next (``None``: now — it never was)."""
        last = self.started.get(provider)
        return None if last is None else last + self.floor

    def claim(self, provider: str, now: datetime) -> tuple[ProbeSchedule, bool]:
        """Take the probe slot of ``provider`` at ``now`` if it is due; say whether it was."""
        due = self.due_at(provider)
        if due is not None and now < due:
            return self, False
        return ProbeSchedule(interval=self.interval, started={**self.started, provider: now}), True


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchPolicy:
    cooldown: timedelta = timedelta(minutes=5)
    cooldown_cap: timedelta = timedelta(hours=1)

    def __post_init__(self) -> None:
        if self.cooldown <= timedelta(0) or self.cooldown_cap < self.cooldown:
            raise ValueError("BenchPolicy needs 0 < cooldown <= cooldown_cap")

    def cooldown_for(self, strikes: int) -> timedelta:
        """The bench of the ``strikes``-th consecutive strike (1 = first), capped."""
        return doubled(self.cooldown, strikes - 1, self.cooldown_cap)


@dataclass(frozen=True, slots=True, kw_only=True)
class Bench:
    """One profile's model bench: consecutive ``UNAVAILABLE`` strikes and the standing deadline."""

    strikes: int = 0
    until: datetime | None = None

    def benched(self, now: datetime) -> bool:
        """The profile is benched at ``now`` (the heartbeat's ``model_down``)."""
        return self.until is not None and now < self.until

    def after(self, availability: Availability, now: datetime, policy: BenchPolicy) -> Bench:
        """The bench after a verdict at ``now``."""
        if availability is Availability.UNAVAILABLE:
            if self.benched(now):
                return self
            strikes = self.strikes + 1
            return Bench(strikes=strikes, until=now + policy.cooldown_for(strikes))
        if availability is Availability.AVAILABLE and self.strikes:
            return Bench(strikes=0, until=self.until)
        return self
