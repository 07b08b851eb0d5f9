"""``fleet_list.dependencies``, the readiness detail and the dependency metrics.

fleetd's outbound dependencies, as the surfaces show them (RFC 0018 §4.3–§4.4, §6; Model health):

* ``inbox`` — the broker endpoints: for each, whether it is the one in use and, if not, why
  (:class:`~fleetd.resilience.Standing`), its breaker state and when an open one may be probed,
  reachability, EWMA latency, calls, failures, error rate and the last error class; and whether
  every broker is down (which makes ``/readyz`` not ready);
* ``webhook`` — the human sink's receivers in failover order, with the same fields per receiver,
  under the sink's kind (``webhook``, ``alertmanager``, ``pagerduty``, ``slack``: the mode);
  the one in use is the lowest-index enabled receiver whose breaker is closed, and while none is
  every receiver is down (which makes notification coverage degraded, not ``/readyz``); a
  receiver that answered 410 Gone stands ``disabled`` until an operator acts;
* ``providers`` — each configured model provider: its last catalog probe, the next one due, how
  it ended, its latency and error counts, how many models it listed, and the profiles it benches
  with the end of each bench;
* ``models`` — each profile that names a model: the verdict on it, its bench, and its effective
  context window with where it comes from.

Endpoints are labelled by index and kind, providers and profiles by their configured names —
never by a URL, a key or a provider's text. The same facts feed the metrics at scrape time
(:class:`DependencyCollector`), with the same bounded labels.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, runtime_checkable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fleetd.bridge.answers import CapacityRow
from fleetd.catalog.tracker import ModelHealth, ProviderState
from fleetd.inbox.amqp_link import BrokerReport
from fleetd.inbox.port import ReplyInbox
from fleetd.notify.receivers import ReceiverReport
from fleetd.resilience import BreakerState, EndpointHealth, Pool, standing
from fleetd.runtime.fleet_models import (
    BenchedProfile,
    BrokerReadiness,
    DependenciesBlock,
    DependencyEndpoint,
    DependencyReadiness,
    InboxDependency,
    ModelSeat,
    ProviderDependency,
    WebhookDependency,
)

__all__ = ["BrokerReporter", "DependencyCollector", "DependencyView"]

_AMQP = "amqp"
_CATALOG = "catalog"


@runtime_checkable
class BrokerReporter(Protocol):
    """An inbox adapter with broker endpoints to report (the AMQP inbox)."""

    def broker_report(self) -> BrokerReport: ...


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat()


def _health(health: EndpointHealth) -> dict[str, object]:
    """An endpoint's health record, as the fields of its model."""
    latency = health.latency
    return {
        "reachable": health.reachable,
        "latency_ms": None if latency is None else round(latency.total_seconds() * 1000, 3),
        "calls": health.calls,
        "failures": health.failures,
        "error_rate": round(health.error_rate, 4),
        "last_error": health.last_error,
        "last_error_at": _iso(health.last_error_at),
        "last_ok_at": _iso(health.last_ok_at),
    }


def _endpoints(
    pool: Pool,
    active: int | None,
    now: datetime,
    kind: str,
    disabled: frozenset[int] = frozenset(),
) -> list[DependencyEndpoint]:
    rows = []
    for index, endpoint in enumerate(pool.endpoints):
        breaker = endpoint.breaker
        rows.append(
            DependencyEndpoint.of(
                index=index,
                kind=kind,
                active=index == active,
                standing=standing(endpoint, index, active, now, disabled=index in disabled),
                breaker=breaker.state_at(now),
                breaker_ready_at=_iso(breaker.ready_at),
                **_health(endpoint.health),
            )
        )
    return rows


def _pool_key(
    pool: Pool, active: int | None, now: datetime, disabled: frozenset[int] = frozenset()
) -> tuple[object, ...]:
    """The endpoint rows' fields that move on an event (a failure, a breaker turning, a switch),
    not on every answered call (see :meth:`DependencyView.change_key`)."""
    return tuple(
        (
            standing(endpoint, index, active, now, disabled=index in disabled),
            endpoint.breaker.state_at(now),
            endpoint.breaker.ready_at,
            endpoint.health.reachable,
            endpoint.health.failures,
            endpoint.health.last_error,
        )
        for index, endpoint in enumerate(pool.endpoints)
    )


_NO_BROKERS = BrokerReadiness.of(kind="memory", all_down=False, active=None)


@dataclass(slots=True, kw_only=True)
class DependencyView:
    """Reads the inbox link, the webhook receivers and the model health into the surfaces."""

    inbox: ReplyInbox
    models: ModelHealth
    clock_now: Callable[[], datetime]
    #: The webhook worker's receivers (``None``, or answering ``None``: notifications are off).
    webhook: Callable[[], ReceiverReport | None] | None = None
    #: The inbox as a broker reporter, or ``None`` for one without brokers. Checked once: the
    #: fleet view reads this block on every tool call, and a protocol ``isinstance`` costs tens of
    #: microseconds.
    _broker: BrokerReporter | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self._broker = self.inbox if isinstance(self.inbox, BrokerReporter) else None

    def view(self, now: datetime) -> DependenciesBlock:
        """The ``dependencies`` block of ``fleet_list``."""
        return DependenciesBlock.of(
            inbox=self._inbox(now),
            webhook=self._webhook(now),
            providers=self._providers(now),
            models=self._models(now),
        )

    def change_key(self, now: datetime) -> tuple[object, ...]:
        """What moves the fleet view's version in this block: all of it but what every answered
        call moves (an endpoint's call count, latency, error rate and last answer time). A broker
        in steady use would otherwise move the view with each call the push loop makes, and a
        long-poll or an ``ETag`` of an idle fleet would never rest. Those fields are as fresh as
        the view they are shown in, which moves at least with each herdr list."""
        inbox: tuple[object, ...] = ()
        if self._broker is not None:
            state = self._broker.broker_report()
            inbox = (state.reachable, state.active, _pool_key(state.pool, state.active, now))
        report = self.receivers()
        webhook: tuple[object, ...] = ()
        if report is not None:
            webhook = (
                report.kind,
                report.all_down,
                report.active,
                _pool_key(report.pool, report.active, now, report.disabled),
            )
        return inbox, webhook, self._providers(now), self._models(now)

    def readiness(self) -> DependencyReadiness:
        """What ``/readyz`` adds: the broker in use and whether every broker is down."""
        if self._broker is None:
            return DependencyReadiness.of(inbox=_NO_BROKERS)
        state = self._broker.broker_report()
        brokers = BrokerReadiness.of(kind=_AMQP, all_down=not state.reachable, active=state.active)
        return DependencyReadiness.of(inbox=brokers)

    def decorate_capacity(self, rows: list[CapacityRow], now: datetime) -> list[CapacityRow]:
        """The capacity rows with each profile's effective context window (the row's bench
        comes with the row itself: placement reads the same one)."""
        decorated = []
        for row in rows:
            window, source = self.models.context_window(row.profile)
            fields = {name: getattr(row, name) for name in row.model_fields_set}
            decorated.append(
                CapacityRow.of(**fields, context_window=window, context_window_source=source)
            )
        return decorated

    def _inbox(self, now: datetime) -> InboxDependency:
        if self._broker is None:
            return InboxDependency.of(kind="memory", all_down=False, active=None, endpoints=[])
        state = self._broker.broker_report()
        return InboxDependency.of(
            kind=_AMQP,
            all_down=not state.reachable,
            active=state.active,
            endpoints=_endpoints(state.pool, state.active, now, _AMQP),
        )

    def receivers(self) -> ReceiverReport | None:
        """The webhook receivers now, or ``None`` while notifications are off."""
        return None if self.webhook is None else self.webhook()

    def _webhook(self, now: datetime) -> WebhookDependency:
        report = self.receivers()
        if report is None:
            return WebhookDependency.of(kind="disabled", all_down=False, active=None, endpoints=[])
        return WebhookDependency.of(
            kind=report.kind,
            all_down=report.all_down,
            active=report.active,
            endpoints=_endpoints(report.pool, report.active, now, report.kind, report.disabled),
        )

    def _providers(self, now: datetime) -> list[ProviderDependency]:
        benched: dict[str | None, list[BenchedProfile]] = {}
        for profile, until in self.models.benched(now):
            key = self.models.seats[profile][0]
            benched.setdefault(key.provider, []).append(
                BenchedProfile.of(profile=profile, until=until.isoformat())
            )
        return [
            self._provider(state, benched.get(name, []))
            for name, state in self.models.providers.items()
        ]

    def _provider(self, state: ProviderState, benched: list[BenchedProfile]) -> ProviderDependency:
        fetch = state.fetch
        outcome = None if fetch is None else ("ok" if fetch.error is None else fetch.error.value)
        return ProviderDependency.of(
            name=state.name,
            last_probe_at=_iso(state.last_probe_at),
            next_probe_at=_iso(self.models.schedule_due(state)),
            last_outcome=outcome,
            listed_models=None if state.catalog is None else len(state.catalog.entries),
            benched=benched,
            **_health(state.health),
        )

    def _models(self, now: datetime) -> list[ModelSeat]:
        rows = []
        for profile, (key, seat) in sorted(self.models.seats.items()):
            window, source = self.models.context_window(profile)
            rows.append(
                ModelSeat.of(
                    profile=profile,
                    provider=key.provider,
                    model=key.model,
                    verdict=seat.verdict.availability,
                    reason=seat.verdict.reason,
                    benched_until=_iso(self.models.benched_until(profile, now)),
                    strikes=seat.bench.strikes,
                    context_window=window,
                    context_window_source=source,
                )
            )
        return rows


class DependencyCollector(Collector):
    """The dependency series, read from live state at each scrape (labels: kind and endpoint
    index, provider or profile name)."""

    def __init__(self, view: DependencyView) -> None:
        self._view = view

    def collect(self) -> Iterator[Metric]:
        now = self._view.clock_now()
        up = GaugeMetricFamily(
            "fleetd_dependency_endpoint_up",
            "0 after an attempt the endpoint did not answer; 1 while its last attempt was "
            "answered, and before any attempt (never tried is not down).",
            labels=["kind", "endpoint"],
        )
        disabled = GaugeMetricFamily(
            "fleetd_dependency_endpoint_disabled",
            "1 while the endpoint is disabled (a webhook receiver that answered 410 Gone) until "
            "an operator changes the config or replays an incident.",
            labels=["kind", "endpoint"],
        )
        active = GaugeMetricFamily(
            "fleetd_dependency_endpoint_active",
            "1 for the endpoint in use.",
            labels=["kind", "endpoint"],
        )
        breaker = GaugeMetricFamily(
            "fleetd_dependency_breaker_state",
            "1 for the breaker state of each endpoint.",
            labels=["kind", "endpoint", "state"],
        )
        latency = GaugeMetricFamily(
            "fleetd_dependency_latency_seconds",
            "EWMA latency of the endpoint's answered calls.",
            labels=["kind", "endpoint"],
        )
        calls = CounterMetricFamily(
            "fleetd_dependency_calls",
            "Calls that reached the endpoint (since it was configured).",
            labels=["kind", "endpoint"],
        )
        failures = CounterMetricFamily(
            "fleetd_dependency_failures",
            "Failover-class failures of the endpoint (since it was configured).",
            labels=["kind", "endpoint"],
        )
        all_down = GaugeMetricFamily(
            "fleetd_dependency_all_down",
            "1 while every endpoint of the dependency is down.",
            labels=["kind"],
        )

        def health(kind: str, name: str, record: EndpointHealth) -> None:
            up.add_metric([kind, name], 0.0 if record.reachable is False else 1.0)
            calls.add_metric([kind, name], record.calls)
            failures.add_metric([kind, name], record.failures)
            if record.latency is not None:
                latency.add_metric([kind, name], record.latency.total_seconds())

        def endpoints(
            kind: str, pool: Pool, in_use: int | None, off: frozenset[int] = frozenset()
        ) -> None:
            for index, endpoint in enumerate(pool.endpoints):
                name = str(index)
                health(kind, name, endpoint.health)
                active.add_metric([kind, name], 1.0 if index == in_use else 0.0)
                disabled.add_metric([kind, name], 1.0 if index in off else 0.0)
                current = endpoint.breaker.state_at(now)
                for each in BreakerState:
                    breaker.add_metric([kind, name, each.value], 1.0 if each is current else 0.0)

        inbox = self._view.inbox
        if isinstance(inbox, BrokerReporter):
            state = inbox.broker_report()
            all_down.add_metric([_AMQP], 0.0 if state.reachable else 1.0)
            endpoints(_AMQP, state.pool, state.active)
        receivers = self._view.receivers()
        if receivers is not None:
            all_down.add_metric([receivers.kind], 1.0 if receivers.all_down else 0.0)
            endpoints(receivers.kind, receivers.pool, receivers.active, receivers.disabled)
        for name, provider in self._view.models.providers.items():
            health(_CATALOG, name, provider.health)
        yield from (up, active, breaker, latency, calls, failures, all_down, disabled)
        yield from self._profiles(now)

    def _profiles(self, now: datetime) -> Iterator[Metric]:
        models = self._view.models
        benched = GaugeMetricFamily(
            "fleetd_profile_benched",
            "1 while the profile is benched because its provider no longer lists its model.",
            labels=["profile"],
        )
        verdict = GaugeMetricFamily(
            "fleetd_profile_model_availability",
            "1 for the current verdict on the profile's model (available, unavailable, unknown).",
            labels=["profile", "availability"],
        )
        window = GaugeMetricFamily(
            "fleetd_profile_context_window_tokens",
            "The profile's effective context window (catalog, else configured).",
            labels=["profile"],
        )
        for profile, (_, seat) in sorted(models.seats.items()):
            benched.add_metric([profile], 1.0 if seat.bench.benched(now) else 0.0)
            verdict.add_metric([profile, seat.verdict.availability.value], 1.0)
            tokens, _source = models.context_window(profile)
            if tokens is not None:
                window.add_metric([profile], float(tokens))
        yield from (benched, verdict, window)
