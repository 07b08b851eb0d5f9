"""The loops one fleetd runs, and how often: each step that changes what ``fleet_list`` shows
is settled (it gets a fleet view version of its own)."""

from __future__ import annotations

from fleetd.compose.service import AGENTS_REFRESH_SECONDS, Fleetd
from fleetd.journal.retention import RETENTION_PASS_SECONDS
from fleetd.notify.worker import LEASE_MARGIN
from fleetd.runtime.scheduler import STALL_FLOOR_SECONDS, Loop

__all__ = ["WEBHOOK_PASS_SECONDS", "schedule"]

PUSH_INTERVAL_SECONDS = 2.0
CONFIG_CHECK_SECONDS = 2.0
WEBHOOK_PASS_SECONDS = 0.5  # one delivery pass: escalation reaches the receiver well within 1 s
#: How often the model-health loop looks for a provider whose catalog probe is due (each
#: provider is still read at most once per modelHealth.probeIntervalSeconds, floor 5 min).
MODEL_HEALTH_SECONDS = 15.0


def schedule(service: Fleetd) -> None:
    """The loops; each step that changes what ``fleet_list`` shows is settled."""
    # Each step is settled: what it changed gets a fleet view version of its own.
    settled = service.views.settling
    service.scheduler.add(
        Loop(
            name="status-poller",
            step=settled(service.bridge.deliverer.poll_once),
            interval=service.config.current.herdr.status_poll_interval.total_seconds,  # no reload
        )
    )
    service.scheduler.add(
        Loop(
            name="push",
            step=settled(service.push.push_once),
            interval=lambda: PUSH_INTERVAL_SECONDS,
        )
    )

    async def deliver() -> None:
        # what a person is owed is recorded before the pass sends
        await service.health.journal_step(service.clock.now())
        await service.sink.step()

    def longest_pass() -> float:
        """A delivery pass ends by its claims' lease (one request limit per receiver, one more
        and the margin), plus the floor every loop gets for its other calls."""
        notifications = service.config.current.health.notifications
        receivers = max(1, len(notifications.receiver_envs))
        lease = (receivers + 1) * notifications.request_timeout + LEASE_MARGIN
        return lease.total_seconds() + STALL_FLOOR_SECONDS

    async def purge() -> None:
        await service.retention.step()

    service.scheduler.add(
        Loop(
            name="webhook",
            step=deliver,
            interval=lambda: WEBHOOK_PASS_SECONDS,
            stall_after=longest_pass,
        )
    )
    service.scheduler.add(
        Loop(name="journal-retention", step=purge, interval=lambda: RETENTION_PASS_SECONDS)
    )
    service.scheduler.add(
        Loop(name="model-health", step=service.models.step, interval=lambda: MODEL_HEALTH_SECONDS)
    )
    service.scheduler.add(
        Loop(
            name="config",
            step=settled(service.check_config),
            interval=lambda: CONFIG_CHECK_SECONDS,
        )
    )
    service.scheduler.add(
        Loop(name="health", step=settled(service.health.tick), interval=service.health.interval)
    )

    async def renew() -> None:
        await service.instances.step(service.clock.now())

    service.scheduler.add(Loop(name="instances", step=renew, interval=service.health.interval))
    service.scheduler.add(
        Loop(
            name="herdr-agents",
            step=settled(service.observe_herdr),
            interval=lambda: AGENTS_REFRESH_SECONDS,
            run_first_immediately=False,  # start() has just observed
        )
    )
