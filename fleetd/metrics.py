"""Prometheus series of fleetd, on an injected registry.

Every declared series is fed: counters where the event happens (herdr requests in
:class:`~fleetd.runtime.link.LinkObserver`, tool calls in the tool registry's result hook), and
gauges of live state (sessions, the control link) are read from that state at scrape time. The
outbound dependencies' series (``fleetd_dependency_*``, ``fleetd_profile_*``) are read at scrape
time too, by :class:`~fleetd.runtime.dependencies.DependencyCollector`, which the composition
root registers on the same registry.

Every series lives on the :class:`~prometheus_client.CollectorRegistry` handed to :class:`Metrics`,
never on the process-global default registry, so two services (or two tests) in one process never
share counters. Labels are bounded enums or configured names — never ids, URLs or error text.

Every labelled series exists from the start: the composition root hands
:meth:`Metrics.initialise` each one's label sets (every combination of its bounded values;
configured names as the config stands, again after a reload —
:func:`fleetd.compose.series.start_series`), so a first event is a step from 0 that ``increase()``
sees,
not a series that appears already at 1. A gauge rebuilt from live state at each refresh is
:meth:`Metrics.reset` first, which puts its initial label sets back at 0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics import MetricWrapperBase

__all__ = ["LabelSets", "Metrics"]

LabelSets = Mapping[MetricWrapperBase, Iterable[Mapping[str, str]]]
"""Labelled series -> every label set it starts with (label name -> value)."""


class Metrics:
    """All of fleetd's series, created once per service by the composition root."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        # configuration
        self.config_reloads_total = Counter(
            "fleetd_config_reloads_total",
            "Configuration reload attempts by outcome.",
            ["outcome"],
            registry=r,
        )
        # herdr control link
        self.herdr_requests_total = Counter(
            "fleetd_herdr_requests_total",
            "Requests sent to herdr by port method and outcome (ok, error, link_failed).",
            ["method", "outcome"],
            registry=r,
        )
        self.control_link_up = Gauge(
            "fleetd_control_link_up",
            "1 while the control link's state (fleet_list.controlLink.state) is up.",
            registry=r,
        )
        # bridge
        self.tool_calls_total = Counter(
            "fleetd_tool_calls_total",
            "Fleet tool calls that reached the registry, by tool and outcome (ok or error code).",
            ["tool", "outcome"],
            registry=r,
        )
        self.tickets_total = Counter(
            "fleetd_tickets_total",
            "Tickets reaching a terminal outcome, once each, by outcome and source.",
            ["outcome", "source"],
            registry=r,
        )
        self.sessions = Gauge(
            "fleetd_sessions",
            "Live sessions by profile and state.",
            ["profile", "state"],
            registry=r,
        )
        self.nudges_total = Counter(
            "fleetd_nudges_total", "Inbox nudges injected into leads.", ["lead"], registry=r
        )
        self.mute_total = Counter(
            "fleet_health_mute_total",
            "Turns resolved through the completion fallback instead of fleet_reply.",
            ["profile"],
            registry=r,
        )
        self.inbox_decode_failures_total = Counter(
            "fleetd_inbox_decode_failures_total",
            "Inbox entries that could not be decoded, by reason.",
            ["reason"],
            registry=r,
        )
        # health
        # The spec names both ``fleet_health_incidents`` (a gauge) and
        # ``fleet_health_incidents_total`` (a counter). prometheus_client reserves the counter's
        # stem, so the gauge lives on a second registry and the exposition joins the two.
        self.gauges_registry = CollectorRegistry(auto_describe=True)
        self.health_incidents = Gauge(
            "fleet_health_incidents",
            "Open health incidents; route is who holds each: a lead, or a person (human).",
            ["scope", "state", "severity", "route"],
            registry=self.gauges_registry,
        )
        self.health_incidents_total = Counter(
            "fleet_health_incidents_total",
            "Incident lifecycle events.",
            ["event"],
            registry=r,
        )
        self.lead_health = Gauge(
            "fleet_lead_health",
            "1 for the current health state of each configured lead.",
            ["lead", "state"],
            registry=r,
        )
        self.lead_assigned_incidents = Gauge(
            "fleet_lead_assigned_incidents",
            "Open incidents each configured lead holds for another lead (foreign assignments).",
            ["lead"],
            registry=r,
        )
        # the human sink (M4 §10.6); fed by fleetd.notify.worker.SinkWorker
        self.notifications_total = Counter(
            "fleet_health_notifications_total",
            "Sink delivery attempts by event type and outcome (delivered, network, timeout, "
            "http_408, http_429, http_5xx, http_410, http_4xx, http_other, invalid_url, "
            "payload_bug, payload_refused).",
            ["event", "outcome"],
            registry=r,
        )
        self.notification_queue_depth = Gauge(
            "fleet_health_notification_queue_depth",
            "Outstanding webhook delivery attempts in the journal (due, leased or waiting).",
            registry=r,
        )
        self.notification_last_success_seconds = Gauge(
            "fleet_health_notification_last_success_seconds",
            "Unix time of the last delivered webhook event; 0 before the first.",
            registry=r,
        )
        self.notification_capability = Gauge(
            "fleet_health_notification_capability",
            "1 for the notification mode (disabled, webhook, alertmanager, pagerduty, slack) and "
            "the health coverage it gives "
            "(off, partial, full, degraded).",
            ["mode", "status"],
            registry=r,
        )
        # the incident journal; fed by fleetd.journal.watch.JournalWatch
        self.journal_up = Gauge(
            "fleetd_journal_up",
            "1 while the incident journal answers; 0 from a failed operation until one succeeds.",
            registry=r,
        )
        self.journal_operation_seconds = Histogram(
            "fleetd_journal_operation_seconds",
            "Duration of incident journal operations (failed ones included), by port method.",
            ["operation"],
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
            registry=r,
        )
        self.pane_reads_total = Counter(
            "fleet_health_pane_reads_total",
            "Pane reads performed for health evidence, by outcome.",
            ["outcome"],
            registry=r,
        )
        self.repairs_total = Counter(
            "fleet_health_lost_boundary_repairs_total",
            "Lost-boundary repair answers (reconcile_lost_boundary), by typed result.",
            ["result"],
            registry=r,
        )
        self.tick_seconds = Histogram(
            "fleet_health_tick_seconds",
            "Duration of one fleet health tick.",
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
            registry=r,
        )

        # Gauges read from live state (sessions) are refreshed by these hooks at each scrape.
        self.before_scrape: list[Callable[[], None]] = []
        self._initial: dict[MetricWrapperBase, list[dict[str, str]]] = {}

    def initialise(self, label_sets: LabelSets) -> None:
        """Create every given label set of each series (a new child counts or reads 0); a
        series' sets replace those it was given before (a reload drops a retired lead's from
        :meth:`reset`; a counter's existing children stay, as counters do)."""
        for series, sets in label_sets.items():
            initial = [dict(labels) for labels in sets]
            for labels in initial:
                series.labels(**labels)
            self._initial[series] = initial

    def reset(self, gauge: Gauge) -> None:
        """Forget every child of a gauge rebuilt from live state, then put its initial label
        sets back at 0 (call before setting what is live now)."""
        gauge.clear()
        for labels in self._initial.get(gauge, ()):
            gauge.labels(**labels).set(0)

    def exposition(self) -> bytes:
        """The text exposition of every fleetd series, gauges refreshed first."""
        for refresh in self.before_scrape:
            refresh()
        return generate_latest(self.registry) + generate_latest(self.gauges_registry)
