"""ModelHealth on a fake catalog and a fake clock: escalating benches, reloads that change a model
or repoint a provider, a probe that outlives its provider, and the context window's changes."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

import pytest

from fleetd.catalog.fake import FakeModelCatalog
from fleetd.catalog.port import CatalogAnswer, CatalogTarget
from fleetd.catalog.tracker import ModelHealth
from fleetd.clock import FakeClock
from fleetd.config import FleetdConfig, parse_config
from fleetd.errors import ProfileBenchedError
from fleetd.resilience import Availability, CatalogFetch, ErrorClass

FREE = {"p": None, "q": 1, "r": 0}


def _unread() -> dict[str, int | None]:
    """The fleet's free slots, which placing a profile that is not benched must never count."""
    raise AssertionError("the whole fleet was counted for a spawn that is not refused")


def config(**profile: Any) -> FleetdConfig:
    document: dict[str, Any] = {
        "providers": [{"name": "prov", "baseUrl": "http://catalog.invalid/v1"}],
        "profiles": {
            "p": {"kind": "codex", "model": "m1", "provider": "prov", "contextWindow": 1000}
            | profile,
            "q": {"kind": "codex"},
            "r": {"kind": "codex", "maxLoad": 1},
        },
    }
    return parse_config(document, {}).config


class Holder:
    def __init__(self, value: FleetdConfig) -> None:
        self.value = value

    def __call__(self) -> FleetdConfig:
        return self.value


def tracker(
    settings: Holder, catalog: FakeModelCatalog | None = None
) -> tuple[ModelHealth, FakeModelCatalog, FakeClock]:
    clock = FakeClock()
    fake = catalog or FakeModelCatalog()
    health = ModelHealth(catalog=fake, clock=clock, settings=settings, environ={})
    return health, fake, clock


async def test_repeated_omission_benches_longer_and_a_listing_resets_the_count() -> None:
    """5 min, then 10 min on the next strike after expiry; listed again, the count restarts."""
    health, fake, clock = tracker(Holder(config()))
    fake.lists("prov", {"other": None})
    await health.step()
    assert health.benched_until("p", clock.now()) == clock.now() + timedelta(minutes=5)
    clock.advance(300)
    await health.step()
    assert health.benched_until("p", clock.now()) == clock.now() + timedelta(minutes=10)
    clock.advance(600)
    fake.lists("prov", {"m1": None})
    await health.step()
    assert health.availability("p") is Availability.AVAILABLE
    assert health.seats["p"][1].bench.strikes == 0


async def test_a_verdict_during_a_bench_does_not_extend_it() -> None:
    """The second bench lasts 10 min; the probe 5 min into it still finds the model missing and
    leaves its end alone; the bench clears on expiry."""
    health, fake, clock = tracker(Holder(config()))
    fake.lists("prov", {"other": None})
    await health.step()
    clock.advance(300)
    await health.step()
    until = health.benched_until("p", clock.now())
    assert until == clock.now() + timedelta(minutes=10)
    clock.advance(300)
    await health.step()
    assert fake.fetched == ["prov"] * 3
    assert health.benched_until("p", clock.now()) == until
    clock.advance(300)
    assert health.benched_until("p", clock.now()) is None


async def test_the_refusal_names_free_unbenched_profiles() -> None:
    """The hint lists the other profiles not benched with a free slot (or no cap), sorted."""
    health, fake, clock = tracker(Holder(config()))
    fake.lists("prov", {"other": None})
    await health.step()
    refusal = health.refusal("p", lambda: FREE, clock.now())
    assert isinstance(refusal, ProfileBenchedError)
    assert refusal.hint["profiles"] == ["q"]
    assert refusal.hint["retryAfterSeconds"] == 300
    assert health.refusal("q", _unread, clock.now()) is None
    assert health.refusal("absent", _unread, clock.now()) is None


async def test_a_reload_that_changes_the_model_starts_its_seat_afresh() -> None:
    """The new model is not benched for the old one's absence; it is judged by the next probe."""
    settings = Holder(config())
    health, fake, clock = tracker(settings)
    fake.lists("prov", {"m2": 4000})
    await health.step()
    assert health.benched_until("p", clock.now()) is not None
    settings.value = config(model="m2")
    await health.step()
    assert health.benched_until("p", clock.now()) is None
    assert health.availability("p") is Availability.AVAILABLE  # the cached catalog lists it
    assert health.context_window("p") == (4000, "catalog")
    assert fake.fetched == ["prov"]


async def test_a_repointed_provider_is_probed_afresh_and_its_old_answer_discarded() -> None:
    """A new base URL is a new endpoint: probed at once, no bench carried over; a probe still
    running against the old one when the reload lands records nothing."""
    settings = Holder(config())
    gate = asyncio.Event()

    class Slow(FakeModelCatalog):
        async def fetch(self, target: CatalogTarget, *, limit: timedelta) -> CatalogAnswer:
            if target.base_url.endswith("/old"):
                await gate.wait()
            return await super().fetch(target, limit=limit)

    slow = Slow()
    slow.lists("prov", {"other": None})
    document = settings.value.model_dump(by_alias=True)
    document["providers"][0]["baseUrl"] = "http://catalog.invalid/old"
    settings.value = parse_config(document, {}).config
    health, _, clock = tracker(settings, slow)
    running = asyncio.ensure_future(health.step())
    await asyncio.sleep(0)
    settings.value = config()  # repointed while the probe waits
    slow.lists("prov", {"m1": None})
    gate.set()
    await running
    assert health.providers["prov"].serial == 0
    await health.step()
    assert health.providers["prov"].serial == 1
    assert health.availability("p") is Availability.AVAILABLE
    assert health.benched_until("p", clock.now()) is None


async def test_the_context_window_follows_the_catalog_both_ways_and_logs_each_change(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Larger or smaller than configured, the catalog's value is used, logged once per change;
    a failed fetch keeps the last catalog's value; a model the catalog states nothing for
    goes back to the configured value."""
    caplog.set_level(logging.INFO, logger="fleetd.catalog")
    settings = Holder(config())
    health, fake, clock = tracker(settings)
    fake.lists("prov", {"m1": 5000, "m3": None})
    await health.step()
    assert health.context_window("p") == (5000, "catalog")
    clock.advance(300)
    fake.fails("prov", ErrorClass.SERVER_ERROR)
    await health.step()
    assert health.context_window("p") == (5000, "catalog")
    clock.advance(300)
    fake.lists("prov", {"m1": 500, "m3": None})
    await health.step()
    assert health.context_window("p") == (500, "catalog")
    settings.value = config(model="m3")
    await health.step()
    assert health.context_window("p") == (1000, "config")
    windows = [r.getMessage() for r in caplog.records if "context window" in r.getMessage()]
    assert windows == [
        "profile p: context window set from provider catalog: 5000 (configured 1000)",
        "profile p: context window set from provider catalog: 500 (configured 1000)",
        "profile p: context window back to the configured 1000",
    ]


async def test_unprobed_profiles_and_providers_are_never_fetched() -> None:
    """A provider no profile names is not read; a profile naming an unlisted provider is
    unknown (not covered); a profile without a model has no seat."""
    document: dict[str, Any] = {
        "providers": [
            {"name": "used", "baseUrl": "http://a.invalid/v1"},
            {"name": "idle", "baseUrl": "http://b.invalid/v1"},
        ],
        "profiles": {
            "p": {"kind": "codex", "model": "m", "provider": "used"},
            "x": {"kind": "codex", "model": "m", "provider": "nowhere"},
            "n": {"kind": "codex"},
        },
    }
    health, fake, clock = tracker(Holder(parse_config(document, {}).config))
    fake.fails("used", ErrorClass.THROTTLED, retry_after=timedelta(seconds=30))
    await health.step()
    assert fake.fetched == ["used"]
    assert set(health.seats) == {"p", "x"}
    assert health.seats["x"][1].verdict.reason.value == "not_covered"
    assert health.schedule_due(health.providers["used"]) == clock.now() + timedelta(minutes=5)
    assert health.schedule_due(health.providers["idle"]) is None
    assert health.context_window("n") == (None, None)
    await health.aclose()
    assert fake.closed


async def test_a_long_retry_after_moves_the_next_probe_past_the_floor() -> None:
    """Retry-After beyond the floor is honoured, capped at an hour."""
    health, fake, clock = tracker(Holder(config()))
    fake.answers["prov"] = CatalogAnswer(
        fetch=CatalogFetch(error=ErrorClass.THROTTLED), retry_after=timedelta(days=2)
    )
    await health.step()
    assert health.schedule_due(health.providers["prov"]) == clock.now() + timedelta(hours=1)
