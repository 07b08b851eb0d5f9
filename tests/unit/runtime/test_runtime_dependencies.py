"""The dependencies surface and its metrics, from an inbox link and the model health."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from fleetd.bridge.answers import wire
from fleetd.catalog.fake import FakeModelCatalog
from fleetd.catalog.tracker import ModelHealth
from fleetd.clock import FakeClock
from fleetd.config import parse_config
from fleetd.inbox.amqp_link import BrokerReport
from fleetd.inbox.memory import InMemoryInbox
from fleetd.metrics import Metrics
from fleetd.notify.receivers import ReceiverReport
from fleetd.resilience import ErrorClass, Outcome, Pool
from fleetd.runtime import DependencyCollector, DependencyView

DOCUMENT: dict[str, Any] = {
    "providers": [{"name": "prov", "baseUrl": "http://secret-host.invalid/v1"}],
    "profiles": {"p": {"kind": "codex", "model": "m", "provider": "prov"}},
}


class Linked(InMemoryInbox):
    """An inbox that reports two brokers: the primary refused three times, the second in use."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        pool = Pool.of("0", "1")
        for _ in range(3):
            pool = pool.observe(0, Outcome(error=ErrorClass.REFUSED), clock.now())
        pool = pool.observe(1, Outcome(latency=timedelta(milliseconds=3)), clock.now())
        self.state = BrokerReport(pool=pool, active=1, reachable=True)

    def broker_report(self) -> BrokerReport:
        return self.state


def _block(view: DependencyView, clock: FakeClock) -> dict[str, Any]:
    """The ``dependencies`` block as ``fleet_list`` writes it."""
    return wire(view.view(clock.now()))


def _view(inbox: InMemoryInbox, clock: FakeClock) -> tuple[DependencyView, FakeModelCatalog]:
    fake = FakeModelCatalog()
    config = parse_config(DOCUMENT, {}).config
    models = ModelHealth(catalog=fake, clock=clock, settings=lambda: config, environ={})
    return DependencyView(inbox=inbox, models=models, clock_now=clock.now), fake


async def test_brokers_show_by_index_which_serves_and_why_the_others_do_not() -> None:
    """The open primary is breaker_open with its cooldown end; the second is active; all-down
    is false; readiness says the same."""
    clock = FakeClock()
    view, _ = _view(Linked(clock), clock)
    inbox = _block(view, clock)["inbox"]
    primary, second = inbox["endpoints"]
    assert (inbox["kind"], inbox["allDown"], inbox["active"]) == ("amqp", False, 1)
    assert (primary["standing"], primary["breaker"], primary["lastError"]) == (
        "breaker_open",
        "open",
        "refused",
    )
    assert primary["breakerReadyAt"] == (clock.now() + timedelta(seconds=5)).isoformat()
    assert (second["standing"], second["latencyMs"], second["failures"]) == ("active", 3.0, 0)
    assert wire(view.readiness()) == {"inbox": {"kind": "amqp", "allDown": False, "active": 1}}


async def test_a_memory_inbox_has_no_endpoints() -> None:
    """The in-memory inbox is never down and lists nothing."""
    clock = FakeClock()
    view, _ = _view(InMemoryInbox(), clock)
    assert _block(view, clock)["inbox"] == {
        "kind": "memory",
        "allDown": False,
        "active": None,
        "endpoints": [],
    }
    assert wire(view.readiness())["inbox"]["allDown"] is False


async def test_metrics_label_by_kind_index_and_names_never_urls() -> None:
    """Endpoint, breaker, latency, call and failure series per broker index and provider name,
    the bench and verdict per profile; no URL or host appears."""
    clock = FakeClock()
    view, fake = _view(Linked(clock), clock)
    fake.lists("prov", {"other": 8000})
    await view.models.step()
    metrics = Metrics()
    metrics.registry.register(DependencyCollector(view))
    text = metrics.exposition().decode()
    for line in (
        'fleetd_dependency_endpoint_active{endpoint="1",kind="amqp"} 1.0',
        'fleetd_dependency_breaker_state{endpoint="0",kind="amqp",state="open"} 1.0',
        'fleetd_dependency_failures_total{endpoint="0",kind="amqp"} 3.0',
        'fleetd_dependency_calls_total{endpoint="prov",kind="catalog"} 1.0',
        'fleetd_dependency_all_down{kind="amqp"} 0.0',
        'fleetd_profile_benched{profile="p"} 1.0',
        'fleetd_profile_model_availability{availability="unavailable",profile="p"} 1.0',
    ):
        assert line in text, line
    assert "secret-host" not in text
    assert "://" not in text


def _receivers(clock: FakeClock) -> ReceiverReport:
    """Two receivers: the primary struck three times (open), the second answered in 7 ms."""
    pool = Pool.of("0", "1")
    for _ in range(3):
        pool = pool.observe(0, Outcome(error=ErrorClass.SERVER_ERROR), clock.now())
    pool = pool.observe(1, Outcome(latency=timedelta(milliseconds=7)), clock.now())
    return ReceiverReport(pool=pool, active=1)


async def test_webhook_receivers_show_by_index_which_serves_and_why_the_others_do_not() -> None:
    """The open primary is breaker_open with its cooldown end, the second active with its EWMA
    latency; no URL; once the primary's cooldown has passed it shows probe_due."""
    clock = FakeClock()
    view, _ = _view(InMemoryInbox(), clock)
    report = _receivers(clock)
    view.webhook = lambda: report
    webhook = _block(view, clock)["webhook"]
    primary, second = webhook["endpoints"]
    assert (webhook["kind"], webhook["allDown"], webhook["active"]) == ("webhook", False, 1)
    assert (primary["index"], primary["kind"], primary["standing"]) == (
        0,
        "webhook",
        "breaker_open",
    )
    assert (primary["breaker"], primary["failures"], primary["lastError"]) == (
        "open",
        3,
        "server_error",
    )
    assert primary["breakerReadyAt"] == (clock.now() + timedelta(seconds=5)).isoformat()
    assert (second["standing"], second["latencyMs"], second["calls"]) == ("active", 7.0, 1)
    clock.advance(5)
    assert _block(view, clock)["webhook"]["endpoints"][0]["standing"] == "probe_due"
    assert wire(view.readiness()) == {"inbox": {"kind": "memory", "allDown": False, "active": None}}


async def test_a_disabled_sink_has_no_receivers() -> None:
    """Notifications off (no worker, or one without a target): kind disabled, nothing listed."""
    clock = FakeClock()
    view, _ = _view(InMemoryInbox(), clock)
    disabled = {"kind": "disabled", "allDown": False, "active": None, "endpoints": []}
    assert _block(view, clock)["webhook"] == disabled
    view.webhook = lambda: None
    assert _block(view, clock)["webhook"] == disabled


async def test_webhook_metrics_label_by_index_and_count_all_down() -> None:
    """Receiver series carry kind webhook and the index; all-down is 1 while no breaker is
    closed; no URL appears."""
    clock = FakeClock()
    view, _ = _view(InMemoryInbox(), clock)
    reports = [_receivers(clock)]
    view.webhook = lambda: reports[-1]
    metrics = Metrics()
    metrics.registry.register(DependencyCollector(view))
    text = metrics.exposition().decode()
    for line in (
        'fleetd_dependency_endpoint_active{endpoint="1",kind="webhook"} 1.0',
        'fleetd_dependency_breaker_state{endpoint="0",kind="webhook",state="open"} 1.0',
        'fleetd_dependency_failures_total{endpoint="0",kind="webhook"} 3.0',
        'fleetd_dependency_latency_seconds{endpoint="1",kind="webhook"} 0.007',
        'fleetd_dependency_all_down{kind="webhook"} 0.0',
    ):
        assert line in text, line
    reports.append(ReceiverReport(pool=reports[0].pool, active=None))
    assert 'fleetd_dependency_all_down{kind="webhook"} 1.0' in metrics.exposition().decode()
    assert "://" not in text


async def test_a_never_tried_endpoint_reads_up_and_a_disabled_one_says_so() -> None:
    """5c/5i: endpoint_up is 1 before any attempt and 0 only after an unanswered one; a receiver
    a 410 disabled stands disabled (not active) and its disabled gauge is 1, the others 0."""
    clock = FakeClock()
    view, _ = _view(InMemoryInbox(), clock)
    pool = Pool.of("0", "1", "2").observe(2, Outcome(error=ErrorClass.REFUSED), clock.now())
    view.webhook = lambda: ReceiverReport(pool=pool, active=1, disabled=frozenset({0}))
    metrics = Metrics()
    metrics.registry.register(DependencyCollector(view))
    text = metrics.exposition().decode()
    for line in (
        'fleetd_dependency_endpoint_up{endpoint="0",kind="webhook"} 1.0',
        'fleetd_dependency_endpoint_up{endpoint="1",kind="webhook"} 1.0',
        'fleetd_dependency_endpoint_up{endpoint="2",kind="webhook"} 0.0',
        'fleetd_dependency_endpoint_disabled{endpoint="0",kind="webhook"} 1.0',
        'fleetd_dependency_endpoint_disabled{endpoint="1",kind="webhook"} 0.0',
    ):
        assert line in text, line
    webhook = _block(view, clock)["webhook"]
    assert [e["standing"] for e in webhook["endpoints"]] == ["disabled", "active", "unreachable"]


GOLDEN = Path(__file__).with_name("dependencies_block.json")


async def test_the_block_keeps_its_bytes_with_every_part_filled() -> None:
    """Brokers, receivers, a provider that benches a profile and that profile's seat, written
    byte for byte (names, order, nulls) as the block has always been written."""
    clock = FakeClock()
    view, fake = _view(Linked(clock), clock)
    fake.lists("prov", {"other": 8000})
    await view.models.step()
    view.webhook = lambda: _receivers(clock)
    text = json.dumps(_block(view, clock), separators=(",", ":"))
    assert text == GOLDEN.read_text().strip()
