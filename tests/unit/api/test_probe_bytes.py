"""``/healthz`` and ``/readyz`` keep their bytes while models come to build them.

Each probe is asked of a few fleets on fakes — one plain (before and after it started, and with
no dependencies view), one whose inbox is down with records held in memory, entries it could
not decode, two brokers and a rejected config, and one with the health monitor ticking over an
up and then a down control link — and its status code, media type and body bytes are compared
with ``tests/fixtures/answers/probes.json``, written by this test against the hand-built
answers. Regenerate the file only for an additive change:
``FLEETD_WRITE_GOLDEN=1 pytest tests/unit/api/test_probe_bytes.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleetd.api.app import create_app
from fleetd.clock import FakeClock
from fleetd.errors import ConfigError
from fleetd.inbox.amqp_link import BrokerReport
from fleetd.inbox.codec import DecodeReason
from fleetd.inbox.failures import DecodeFailure, Disposition
from fleetd.inbox.records import InboxRecord, MessageKind
from fleetd.resilience import ErrorClass, Outcome, Pool
from fleetd.testing import TestFleet, build_test_fleet, sample_document
from tests.unit.troubled_inbox import TroubledInbox

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "answers" / "probes.json"


class _TroubledInbox(TroubledInbox):
    """A troubled inbox on two brokers, both down while it is."""

    def broker_report(self) -> BrokerReport:
        pool = Pool.of("0", "1").observe(0, Outcome(error=ErrorClass.REFUSED), FakeClock().now())
        return BrokerReport(pool=pool, active=None if self.down else 1, reachable=not self.down)


async def _probe(fleet: TestFleet, path: str) -> dict[str, Any]:
    """One probe's answer: status code, media type and the body's text, byte for byte."""
    transport = httpx.ASGITransport(app=create_app(fleet.service))
    async with httpx.AsyncClient(transport=transport, base_url="http://fleetd") as client:
        answer = await client.get(path)
    return {
        "status": answer.status_code,
        "type": answer.headers["content-type"],
        "body": answer.content.decode(),
    }


async def _plain(root: Path, answers: dict[str, Any]) -> None:
    """A fleet on an in-memory inbox, health off: before it started, started, and without the
    dependencies view."""
    fleet = build_test_fleet(root / "plain")
    await fleet.service.own_lead_keys()
    await fleet.service.observe_herdr()
    answers["plain/readyz/not-started"] = await _probe(fleet, "/readyz")
    fleet.service.started = True
    answers["plain/readyz/ready"] = await _probe(fleet, "/readyz")
    answers["plain/healthz"] = await _probe(fleet, "/healthz")
    fleet.service.view.dependencies = None
    answers["plain/readyz/no-dependencies"] = await _probe(fleet, "/readyz")


async def _troubled(root: Path, answers: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Two brokers, both down, records held in memory, undecodable entries, a rejected config
    reload with a restart key pending; and the same fleet once the brokers are back."""
    inbox = _TroubledInbox()
    fleet = build_test_fleet(root / "troubled", inbox=inbox)
    await fleet.service.own_lead_keys()
    await fleet.service.observe_herdr()
    fleet.service.started = True
    answers["troubled/readyz/up"] = await _probe(fleet, "/readyz")
    inbox.down = True
    for n, lead in enumerate(("lead-b", "lead")):
        await fleet.bridge.outbox.keep(
            InboxRecord(
                msg_id=f"{lead}-{n}",
                kind=MessageKind.REPLY,
                target=f"m-{n}",
                recipient_lead=lead,
                content="held",
                created_at_epoch_millis=1_000 * (n + 1),
            )
        )
    inbox.bad = [
        DecodeFailure(
            key="lead",
            reason=DecodeReason.MALFORMED_JSON,
            disposition=Disposition.QUARANTINED,
            message_id="a-1",
            version=1,
            detail="redacted",
            first_seen_epoch_millis=1_000,
            last_seen_epoch_millis=2_000,
            occurrences=2,
        )
    ]
    monkeypatch.setattr(fleet.service.config, "_last_error", ConfigError("leads", "bad"))
    monkeypatch.setattr(fleet.service.config, "_pending", ("listen.port", "state.dir"))
    answers["troubled/readyz/down"] = await _probe(fleet, "/readyz")
    answers["troubled/healthz/down"] = await _probe(fleet, "/healthz")


async def _health(root: Path, answers: dict[str, Any]) -> None:
    """Health on: ticked over an up control link, then over a down one."""
    document = sample_document(root / "health")
    document["health"] = {"enabled": True}
    fleet = build_test_fleet(root / "health", document=document)
    await fleet.service.own_lead_keys()
    fleet.service.started = True
    answers["health/healthz/unticked"] = await _probe(fleet, "/healthz")
    await fleet.service.health.tick()
    answers["health/healthz/up"] = await _probe(fleet, "/healthz")
    fleet.control.link_down()
    await fleet.service.health.tick()
    fleet.clock.advance(2)
    await fleet.service.health.tick()
    answers["health/healthz/link-down"] = await _probe(fleet, "/healthz")
    answers["health/readyz/link-down"] = await _probe(fleet, "/readyz")


async def test_the_probes_keep_their_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every probe answer of the three fleets — status, media type and body bytes, so every key
    in its order at every level — is the golden file's."""
    answers: dict[str, Any] = {}
    await _plain(tmp_path, answers)
    await _troubled(tmp_path, answers, monkeypatch)
    await _health(tmp_path, answers)
    text = json.dumps(answers, indent=1, ensure_ascii=False) + "\n"
    assert str(tmp_path) not in text
    if os.environ.get("FLEETD_WRITE_GOLDEN"):
        GOLDEN.write_text(text, encoding="utf-8")
    assert json.loads(text) == json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert text == GOLDEN.read_text(encoding="utf-8")
