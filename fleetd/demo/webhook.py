"""The demo's third act: no lead can act, a person is told by webhook, then told it is over.

A local receiver (:mod:`fleetd.demo.receiver`) verifies every request's Standard Webhooks
signature with the demo's secret and prints each event. With both leads gone, the incidents no
lead can act on are routed to a person and their ``open`` events arrive; when the second lead is
started again by hand, its own incident resolves and the ``resolved`` event follows.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fleetd.clock import Clock
from fleetd.demo.receiver import RunningReceiver, WebhookReceiver, start_receiver
from fleetd.notify.core.signing import WebhookSecret
from fleetd.sim.server import HerdrSimulator

__all__ = ["DemoSink", "human_act", "start_demo_sink"]

Call = Callable[..., Awaitable[dict[str, Any]]]
Until = Callable[..., Awaitable[None]]

URL_ENV = "FLEETD_DEMO_WEBHOOK_URL"
SECRET_ENV = "FLEETD_DEMO_WEBHOOK_SECRET"  # noqa: S105 — the name of a variable, not a secret


@dataclass(slots=True)
class DemoSink:
    """The running receiver and what fleetd's config and environment need to reach it."""

    running: RunningReceiver
    secret: str

    @property
    def environ(self) -> dict[str, str]:
        return {URL_ENV: self.running.url, SECRET_ENV: self.secret}

    @property
    def notifications(self) -> dict[str, str]:
        return {"mode": "webhook", "webhookUrlEnv": URL_ENV, "secretEnv": SECRET_ENV}

    def received(self, kind: str) -> list[str]:
        """The incident ids of the events of ``kind`` received so far (no duplicates)."""
        return [
            e.incident_id
            for e in self.running.receiver.events
            if e.event_type == kind and not e.duplicate
        ]


async def start_demo_sink(clock: Clock, say: Callable[[str], None]) -> DemoSink:
    """A receiver on a free local port with a fresh signing secret, printing what it gets."""
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode("ascii")
    receiver = WebhookReceiver(
        WebhookSecret.parse(secret),
        clock=clock,
        report=lambda line: say(f"webhook receiver: {line}"),
    )
    running = await start_receiver(receiver)
    return DemoSink(running=running, secret=secret)


async def human_act(
    *,
    operator: Call,
    simulator: HerdrSimulator,
    sink: DemoSink,
    until: Until,
    say: Callable[[str], None],
) -> None:
    """Both leads gone: a person gets ``open``; the second lead back: ``resolved`` follows."""
    clock = simulator.clock

    async def to_person() -> list[str]:
        rows = (await operator("fleet_list"))["incidents"]
        return sorted(i["id"] for i in rows if (i.get("routing") or {}).get("route") == "human")

    async def opened() -> list[str]:
        return sink.received("open")

    say("herdr: the agent of lead-b exits too; no healthy lead is left")
    simulator.agent("lead-b").exit()
    await until(clock, to_person, bool, say, label="routed to a person")
    people = await to_person()
    await until(clock, opened, lambda ids: set(people) <= set(ids), say, label="webhook open")
    say("herdr: lead-b is started again by hand")
    simulator.start_by_hand("lead-b")

    async def resolved() -> list[str]:
        return sink.received("resolved")

    await until(clock, resolved, bool, say, label="webhook resolved")
    view = await operator("fleet_list")
    coverage = view.get("healthCoverage", {})
    say(f"  incidents: {len(view.get('incidents', []))}; coverage: {coverage.get('status')}")
