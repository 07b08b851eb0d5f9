"""The webhook loop in a process of its own, for the kill -9 test.

Run as ``python -m tests.integration.sink_process --journal URL --webhook URL --owner NAME``
with the signing secret in ``FLEETD_TEST_WEBHOOK_SECRET``. Every ``--interval`` seconds on the
real clock it runs one pass as ``fleetd serve``'s webhook loop does (the escalation shell's step,
then the delivery worker's, wired as the composition root wires them), printing one JSON line per
pass (the worker's :class:`~fleetd.notify.worker.PassReport`), until it is killed. Nothing else:
the test that starts it records incidents in the journal and watches the receiver.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import random
import sys
from datetime import timedelta

from fleetd.clock import SystemClock
from fleetd.config import FleetdConfig, NotificationMode
from fleetd.journal.sql import SqlJournal
from fleetd.metrics import Metrics
from fleetd.notify.http import HttpWebhookSender
from fleetd.notify.signing import WebhookSecret
from fleetd.notify.sink import SinkTarget
from fleetd.notify.worker import SinkWorker
from fleetd.runtime.escalation import Escalation

SECRET_ENV = "FLEETD_TEST_WEBHOOK_SECRET"


async def run(journal_url: str, webhook: str, owner: str, interval: float) -> None:
    clock = SystemClock()
    journal = SqlJournal(journal_url)
    sender = HttpWebhookSender(clock=clock)
    sink = SinkTarget(
        urls=(webhook,),
        secret=WebhookSecret.parse(os.environ[SECRET_ENV]),
        limit=timedelta(seconds=5),
    )
    base = FleetdConfig()
    notifications = base.health.notifications.model_copy(update={"mode": NotificationMode.WEBHOOK})
    config = base.model_copy(
        update={"health": base.health.model_copy(update={"notifications": notifications})}
    )
    escalation = Escalation(
        journal=journal, settings=lambda: config, receivers=lambda: sink.generation
    )
    worker = SinkWorker(
        journal=journal,
        target=lambda: sink,
        sender=sender,
        clock=clock,
        draw=random.random,
        metrics=Metrics(),
        owner=owner,
        delivered=escalation.delivered,
    )
    while True:
        await escalation.step(clock.now())
        report = await worker.step()
        line = {**dataclasses.asdict(report), "status": worker.health.status.value}
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()
        await clock.sleep(interval)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.integration.sink_process")
    parser.add_argument("--journal", required=True)
    parser.add_argument("--webhook", required=True)
    parser.add_argument("--owner", required=True)
    parser.add_argument("--interval", type=float, default=0.05)
    args = parser.parse_args()
    asyncio.run(run(args.journal, args.webhook, args.owner, args.interval))


if __name__ == "__main__":
    main()
