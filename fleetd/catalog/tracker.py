"""``ModelHealth``: which provider's catalog to read now, what it says, and who sits on the bench.

Theory of operation
-------------------
Each :meth:`ModelHealth.step` (a loop in the composition root) reads the live config and:

1. **syncs** its state with it. A provider is known by name *and* base URL, and a profile's seat
   by profile, provider *and* model, so a reload that repoints a provider or changes a profile's
   model starts that provider or seat afresh (no bench, no schedule carried to a new endpoint or
   model); whatever the config no longer names is dropped. A probe still running for a dropped
   provider finishes on its own, and its answer is discarded;
2. **probes** every provider that a profile with a model names and whose slot is due — at most one
   ``GET {baseUrl}/models`` per provider per :data:`~fleetd.resilience.PROBE_FLOOR`, counted from
   the probe's start (:class:`~fleetd.resilience.ProbeSchedule`), and not before a throttling
   provider's Retry-After. Providers are probed at once, each within the request watchdog;
3. **judges** each seat once per completed fetch of its provider (:func:`~fleetd.resilience.judge`,
   fail-open: only a successfully read catalog that omits the model is ``unavailable``) and moves
   its :class:`~fleetd.resilience.Bench` — an escalating, capped bench that clears on expiry.

``fleet_spawn`` asks :meth:`ModelHealth.refusal` before placing a member: a benched profile is
refused with ``profile_benched``, whose hint names the profiles that can take the work (not
benched, with a free slot). fleetd never moves work to them itself.

**Context window.** A profile's effective window is the one its provider's catalog states for its
model (the last catalog read successfully), larger or smaller than the configured
``contextWindow``; with no catalog read yet, or none stating a window, the configured value stands.
Each change of the effective value is logged once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from fleetd.catalog.port import CatalogTarget, ModelCatalog
from fleetd.clock import Clock
from fleetd.config import FleetdConfig
from fleetd.errors import ProfileBenchedError
from fleetd.resilience import (
    Availability,
    Bench,
    BenchPolicy,
    Catalog,
    CatalogFetch,
    EndpointHealth,
    ErrorClass,
    HealthPolicy,
    ModelVerdict,
    Outcome,
    ProbeSchedule,
    judge,
)

__all__ = ["ModelHealth", "ProviderState", "SeatKey", "SeatState"]

_log = logging.getLogger("fleetd.catalog")

RETRY_AFTER_CAP = timedelta(hours=1)
"""A provider's Retry-After delays its next probe by at most this much."""


@dataclass(frozen=True, slots=True)
class SeatKey:
    """One profile's model on one provider: what a bench is about."""

    profile: str
    provider: str | None
    base_url: str | None  # the provider's, so a repointed provider starts its seats afresh
    model: str


@dataclass(slots=True)
class ProviderState:
    """What one provider, at one base URL, has told fleetd."""

    name: str
    base_url: str
    fetch: CatalogFetch | None = None  # the last completed fetch
    catalog: Catalog | None = None  # the last catalog read successfully
    serial: int = 0  # completed fetches
    last_probe_at: datetime | None = None
    retry_at: datetime | None = None
    health: EndpointHealth = field(default_factory=EndpointHealth)

    @property
    def key(self) -> str:
        return f"{self.name}\n{self.base_url}"


@dataclass(slots=True)
class SeatState:
    """One seat's verdict and bench; ``judged``: its provider's fetch serial last applied."""

    verdict: ModelVerdict
    bench: Bench = field(default_factory=Bench)
    judged: int = 0


class ModelHealth:
    """The catalog probe's state and verdicts (see the module docstring)."""

    def __init__(
        self,
        *,
        catalog: ModelCatalog,
        clock: Clock,
        settings: Callable[[], FleetdConfig],
        environ: Mapping[str, str],
        bench_policy: BenchPolicy | None = None,
        health_policy: HealthPolicy | None = None,
    ) -> None:
        self._catalog = catalog
        self._clock = clock
        self._settings = settings
        self._environ = environ
        self._bench_policy = bench_policy or BenchPolicy()
        self._health_policy = health_policy or HealthPolicy()
        self._schedule = ProbeSchedule()
        self.providers: dict[str, ProviderState] = {}  # by provider name
        self.seats: dict[str, tuple[SeatKey, SeatState]] = {}  # by profile name
        self._windows: dict[str, int | None] = {}  # the effective window last logged

    # -- the loop ------------------------------------------------------------------------------

    async def step(self) -> None:
        """Sync with the config, probe the providers that are due, judge the seats."""
        config = self._settings()
        self._sync(config)
        now = self._clock.now()
        due = [state for state in self._probed(config) if self._claim(state, now)]
        if due:
            await asyncio.gather(*(self._probe(state, config) for state in due))
            config = self._settings()  # a reload during the probes: judge on the new config
            self._sync(config)
        self._judge(config, self._clock.now())

    async def aclose(self) -> None:
        await self._catalog.aclose()

    # -- what the tools and views read ---------------------------------------------------------

    def benched_until(self, profile: str, now: datetime) -> datetime | None:
        """When ``profile``'s bench ends, or ``None`` while it is not benched."""
        seat = self.seats.get(profile)
        if seat is None or not seat[1].bench.benched(now):
            return None
        return seat[1].bench.until

    def refusal(
        self, profile: str, free: Callable[[], Mapping[str, int | None]], now: datetime
    ) -> ProfileBenchedError | None:
        """The ``profile_benched`` error for a benched ``profile``, or ``None`` when it may be
        placed. ``free`` reads each profile's free slots (``None`` for no cap); it counts the
        whole fleet, so it is called only for the refusal's hint, never on the way to a spawn."""
        until = self.benched_until(profile, now)
        if until is None:
            return None
        key = self.seats[profile][0]
        others = sorted(
            name
            for name, slots in free().items()
            if name != profile
            and self.benched_until(name, now) is None
            and (slots is None or slots > 0)
        )
        return ProfileBenchedError(
            f"profile {profile!r} is benched: its provider no longer lists its model",
            profile=profile,
            model=key.model,
            provider=key.provider,
            until=until,
            now=now,
            profiles=others,
        )

    def context_window(self, profile: str) -> tuple[int | None, str | None]:
        """The effective context window of ``profile`` and where it comes from (``catalog`` or
        ``config``; ``None`` when neither states one)."""
        config = self._settings().profiles.get(profile)
        configured = None if config is None else config.context_window
        seat = self.seats.get(profile)
        provider = None if seat is None else self._provider_of(seat[0])
        if seat is not None and provider is not None and provider.catalog is not None:
            stated = provider.catalog.context_window(seat[0].model)
            if stated is not None:
                return stated, "catalog"
        return configured, None if configured is None else "config"

    def schedule_due(self, provider: ProviderState) -> datetime | None:
        """When ``provider`` may be probed next (``None``: now)."""
        due = self._schedule.due_at(provider.key)
        if provider.retry_at is not None and (due is None or provider.retry_at > due):
            return provider.retry_at
        return due

    # -- steps ---------------------------------------------------------------------------------

    def _sync(self, config: FleetdConfig) -> None:
        if self._schedule.interval != config.model_health.probe_interval:
            self._schedule = ProbeSchedule(
                interval=config.model_health.probe_interval, started=self._schedule.started
            )
        providers: dict[str, ProviderState] = {}
        for provider in config.providers:
            known = self.providers.get(provider.name)
            if known is None or known.base_url != provider.base_url:
                known = ProviderState(name=provider.name, base_url=provider.base_url)
            providers[provider.name] = known
        self.providers = providers
        seats: dict[str, tuple[SeatKey, SeatState]] = {}
        for name, profile in sorted(config.profiles.items()):
            if profile.model is None:
                continue
            listed = providers.get(profile.provider or "")
            key = SeatKey(
                profile=name,
                provider=profile.provider,
                base_url=None if listed is None else listed.base_url,
                model=profile.model,
            )
            known_seat = self.seats.get(name)
            if known_seat is None or known_seat[0] != key:
                verdict = judge(key.model, None, covered=listed is not None)
                known_seat = (key, SeatState(verdict=verdict))
            seats[name] = known_seat
        self.seats = seats

    def _probed(self, config: FleetdConfig) -> list[ProviderState]:
        """Providers that some profile with a model names, in config order."""
        named = {key.provider for key, _ in self.seats.values()}
        return [self.providers[p.name] for p in config.providers if p.name in named]

    def _claim(self, state: ProviderState, now: datetime) -> bool:
        if state.retry_at is not None and now < state.retry_at:
            return False
        self._schedule, claimed = self._schedule.claim(state.key, now)
        return claimed

    async def _probe(self, state: ProviderState, config: FleetdConfig) -> None:
        provider = config.provider(state.name)
        variable = None if provider is None else provider.api_key_env
        target = CatalogTarget(
            provider=state.name,
            base_url=state.base_url,
            api_key=self._environ.get(variable) if variable else None,
        )
        started = self._clock.monotonic()
        state.last_probe_at = self._clock.now()
        answer = await self._catalog.fetch(target, limit=config.model_health.request_timeout)
        now = self._clock.now()
        latency = timedelta(seconds=max(0.0, self._clock.monotonic() - started))
        fetch = answer.fetch
        outcome = Outcome(
            error=fetch.error,
            latency=latency if fetch.error is None else None,
            retry_after=answer.retry_after if fetch.error is ErrorClass.THROTTLED else None,
        )
        state.health = state.health.observe(outcome, now, self._health_policy)
        state.fetch, state.serial = fetch, state.serial + 1
        if fetch.catalog is not None:
            state.catalog = fetch.catalog
        if answer.retry_after is not None:
            state.retry_at = now + min(answer.retry_after, RETRY_AFTER_CAP)
        if fetch.error is not None:
            _log.info("catalog of provider %s not read: %s", state.name, fetch.error.value)

    def _judge(self, config: FleetdConfig, now: datetime) -> None:
        for name, (key, seat) in self.seats.items():
            provider = self._provider_of(key)
            if provider is not None and seat.judged != provider.serial:
                seat.judged = provider.serial
                seat.verdict = judge(key.model, provider.fetch)
                was = seat.bench.benched(now)
                seat.bench = seat.bench.after(seat.verdict.availability, now, self._bench_policy)
                if seat.bench.benched(now) and not was:
                    _log.warning(
                        "profile %s benched until %s: provider %s no longer lists model %s",
                        name,
                        seat.bench.until.isoformat() if seat.bench.until else "?",
                        key.provider,
                        key.model,
                    )
            self._log_window(name, config)
        for gone in set(self._windows) - set(self.seats):
            del self._windows[gone]

    def _log_window(self, profile: str, config: FleetdConfig) -> None:
        window, source = self.context_window(profile)
        if profile not in self._windows:
            self._windows[profile] = config.profiles[profile].context_window
        if self._windows[profile] == window:
            return
        self._windows[profile] = window
        if source == "catalog":
            _log.info(
                "profile %s: context window set from provider catalog: %s (configured %s)",
                profile,
                window,
                config.profiles[profile].context_window,
            )
        else:
            _log.info("profile %s: context window back to the configured %s", profile, window)

    def _provider_of(self, key: SeatKey) -> ProviderState | None:
        return None if key.provider is None else self.providers.get(key.provider)

    def availability(self, profile: str) -> Availability | None:
        """The current verdict on ``profile``'s model (``None``: the profile names no model)."""
        seat = self.seats.get(profile)
        return None if seat is None else seat[1].verdict.availability

    def benched(self, now: datetime) -> Iterable[tuple[str, datetime]]:
        """Every benched profile and when its bench ends."""
        for name, (_, seat) in sorted(self.seats.items()):
            if seat.bench.benched(now) and seat.bench.until is not None:
                yield name, seat.bench.until
