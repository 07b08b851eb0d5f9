"""The metrics side: the series fed from the running parts at each scrape, and every labelled
series' label sets from the start (so a first event is a step from 0)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from fleetd import errors
from fleetd.api.tools import INTERNAL_ERROR_CODE, ToolRegistry, ToolResult
from fleetd.bridge import ResultSource, TicketOutcome
from fleetd.bridge.repair_gates import RepairResult
from fleetd.bridge.service import Bridge
from fleetd.bridge.sessions import SessionState
from fleetd.config import FleetdConfig, NotificationMode, ReloadStatus
from fleetd.health.incidents import Route
from fleetd.health.states import STATE_SPECS, LeadState
from fleetd.herdr.control import AgentControl
from fleetd.inbox.codec import DecodeReason
from fleetd.journal.values import EventType
from fleetd.metrics import LabelSets, Metrics
from fleetd.notify.core.retry import OutcomeReason
from fleetd.notify.worker import PAYLOAD_REFUSED
from fleetd.runtime.link import LinkState
from fleetd.runtime.monitor import FleetHealthMonitor

__all__ = ["feed_metrics", "series_label_sets", "start_series"]

# Label values counted as plain words where they happen (LinkObserver, the dispatcher, the
# health views' coverage); listed here so that their series exist from the start.
_HERDR_OUTCOMES = ("ok", "error", "link_failed")
_INCIDENT_EVENTS = ("opened", "updated", "resolved", "reassigned")
_PANE_READ_OUTCOMES = ("ok", "failed")
_COVERAGE_STATUSES = ("off", "partial", "full", "degraded")


def feed_metrics(
    metrics: Metrics,
    *,
    registry: ToolRegistry,
    bridge: Bridge,
    link: LinkState,
    health: FleetHealthMonitor,
) -> None:
    """Count tool calls as they end; read live sessions, the link's state and the health
    coverage at each scrape."""

    def count_call(tool: str | None, result: ToolResult) -> None:
        outcome = "ok" if result.error is None else result.error.code
        metrics.tool_calls_total.labels(tool=tool or "unknown", outcome=outcome).inc()

    def count_sessions() -> None:
        counts: dict[tuple[str, str], int] = {}
        for session in bridge.reads.live_members():
            key = (session.profile, session.state.value)
            counts[key] = counts.get(key, 0) + 1
        metrics.reset(metrics.sessions)
        for (profile, state), count in sorted(counts.items()):
            metrics.sessions.labels(profile=profile, state=state).set(count)

    def link_up() -> float:
        return 1.0 if health.link_view(link).state == "up" else 0.0

    def capability() -> None:
        mode = health.config.current.health.notifications.mode.value
        metrics.reset(metrics.notification_capability)
        metrics.notification_capability.labels(mode=mode, status=health.coverage().status).set(1)

    registry.on_result.append(count_call)
    metrics.before_scrape.append(count_sessions)
    metrics.before_scrape.append(capability)
    metrics.control_link_up.set_function(link_up)


def _every(**values: Iterable[str]) -> list[dict[str, str]]:
    """Every combination of the given label values."""
    names = list(values)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values.values())]


def _tool_error_codes() -> list[str]:
    """Every code a tool call can fail with: the tool error tree's, and ``internal_error``."""
    found, pending = {INTERNAL_ERROR_CODE}, list(errors.ToolError.__subclasses__())
    while pending:
        kind = pending.pop()
        pending.extend(kind.__subclasses__())
        if kind.__module__ == errors.__name__:  # a test's own subclass is no fleetd outcome
            found.add(kind.code)
    found.discard(errors.AuthError.code)  # a token is refused before any tool is known
    return sorted(found)


def _port_methods() -> list[str]:
    """The herdr port's methods, as LinkObserver names them in ``method``."""
    return sorted(
        name
        for name, member in vars(AgentControl).items()
        if callable(member) and not name.startswith("_") and name != "observe"
    )


def series_label_sets(
    metrics: Metrics, *, tools: Iterable[str], settings: FleetdConfig
) -> LabelSets:
    """Every labelled series of ``metrics`` with every label set it can take: each combination
    of its bounded values, with the configured leads and profiles as ``settings`` has them."""
    m = metrics
    leads = [lead.name for lead in settings.leads]
    profiles = list(settings.profiles)
    incident_kinds = [
        {"scope": spec.scope.value, "state": str(state), "severity": spec.severity.value}
        for state, spec in STATE_SPECS.items()
        if spec.opens_incident
    ]
    return {
        m.config_reloads_total: _every(
            outcome=[s.value for s in ReloadStatus if s is not ReloadStatus.UNCHANGED]
        ),
        m.herdr_requests_total: _every(method=_port_methods(), outcome=_HERDR_OUTCOMES),
        m.tool_calls_total: [
            *_every(tool=tools, outcome=["ok", *_tool_error_codes()]),
            {"tool": "unknown", "outcome": errors.UnknownToolError.code},
            {"tool": "unknown", "outcome": errors.AuthError.code},  # refused before any tool
        ],
        m.tickets_total: [
            *_every(outcome=[TicketOutcome.DONE.value], source=[s.value for s in ResultSource]),
            *_every(
                outcome=[TicketOutcome.FAILED.value, TicketOutcome.CANCELLED.value],
                source=["none"],
            ),
        ],
        m.sessions: _every(
            profile=profiles,
            state=[s.value for s in SessionState if s is not SessionState.RELEASED],
        ),
        m.nudges_total: _every(lead=leads),
        m.mute_total: _every(profile=profiles),
        m.inbox_decode_failures_total: _every(reason=[r.value for r in DecodeReason]),
        m.health_incidents: [
            {**kind, "route": route.value} for kind in incident_kinds for route in Route
        ],
        m.health_incidents_total: _every(event=_INCIDENT_EVENTS),
        m.lead_health: _every(lead=leads, state=[s.value for s in LeadState]),
        m.lead_assigned_incidents: _every(lead=leads),
        m.notifications_total: _every(
            event=[e.value for e in EventType],
            outcome=[*(o.value for o in OutcomeReason), PAYLOAD_REFUSED],
        ),
        m.notification_capability: _every(
            mode=[mode.value for mode in NotificationMode], status=_COVERAGE_STATUSES
        ),
        m.pane_reads_total: _every(outcome=_PANE_READ_OUTCOMES),
        m.repairs_total: _every(result=[r.value for r in RepairResult]),
    }


def start_series(metrics: Metrics, *, registry: ToolRegistry, settings: FleetdConfig) -> None:
    """Create every labelled series at 0 (at start, and again after a reload: new leads and
    profiles get theirs)."""
    metrics.initialise(series_label_sets(metrics, tools=registry.names(), settings=settings))
