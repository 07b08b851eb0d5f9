"""A delivery worker in a process of its own, for the kill -9 test.

Run as ``python -m tests.integration.sink_process --journal URL --webhook URL --owner NAME``
with the signing secret in ``FLEETD_TEST_WEBHOOK_SECRET``. It passes over the journal every
``--interval`` seconds on the real clock, printing one JSON line per pass (the
:class:`~fleetd.notify.worker.PassReport`), until it is killed. Nothing else: the test that
starts it records incidents in the journal and watches the receiver.
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
from fleetd.journal.sql import SqlJournal
from fleetd.metrics import Metrics
from fleetd.notify.http import HttpWebhookSender
from fleetd.notify.signing import WebhookSecret
from fleetd.notify.sink import SinkTarget
from fleetd.notify.worker import SinkWorker

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
    worker = SinkWorker(
        journal=journal,
        target=lambda: sink,
        sender=sender,
        clock=clock,
        draw=random.random,
        metrics=Metrics(),
        owner=owner,
        repeat=lambda: timedelta(hours=1),
    )
    while True:
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
