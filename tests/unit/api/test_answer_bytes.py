"""The tool answers and ``GET /v1/fleet`` keep their bytes while the models build them.

One scripted fleet (spawns, sends, a reply, a benched model, health ticks, stops, orphans of a
previous run, preserved worktrees) and one with records held for an unreachable inbox and entries
it could not decode are run on fakes with a fixed sequence of ids, and every answer —
``fleet_spawn``, ``fleet_send``, ``fleet_poll``, ``fleet_status``, ``fleet_reply``,
``fleet_stop``, ``fleet_list`` for each scope, and each scope's ``GET /v1/fleet`` body — is
encoded as the wire encodes it and compared with ``tests/fixtures/answers/golden.json``, which
holds the bytes the hand-built answers gave (written by this test run against the code before
the models built them). Regenerate the file only for an additive change:
``FLEETD_WRITE_GOLDEN=1 pytest tests/unit/api/test_answer_bytes.py``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import secrets
from pathlib import Path
from typing import Any

import pytest

from fleetd.api.tools import Caller, Role, ToolResult
from fleetd.catalog.fake import FakeModelCatalog
from fleetd.herdr.model import AgentStatus
from fleetd.inbox.codec import DecodeReason
from fleetd.inbox.failures import DecodeFailure, Disposition
from fleetd.inbox.records import InboxRecord, MessageKind
from fleetd.testing import TestFleet, build_test_fleet, sample_document
from tests.unit.troubled_inbox import TroubledInbox

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "answers" / "golden.json"
LEAD = Caller(role=Role.LEAD, name="lead")
LEAD_B = Caller(role=Role.LEAD, name="lead-b")
OPERATOR = Caller(role=Role.OPERATOR, name="operator")


def _rooted(text: str, root: Path) -> str:
    """``text`` with the test's temporary root named ``<root>``, and the fake base commit made
    of that root's path too."""
    commit = hashlib.sha1(f"{root / 'repo'}\0HEAD".encode(), usedforsecurity=False).hexdigest()
    return text.replace(str(root), "<root>").replace(commit, "<commit>")


def _wire(document: Any, root: Path) -> str:
    """A document as the wire encodes it, rooted (:func:`_rooted`)."""
    return _rooted(json.dumps(document, ensure_ascii=False, separators=(",", ":")), root)


class _Recorder:
    """Every answer of the script, by label, as wire text."""

    def __init__(self, fleet: TestFleet) -> None:
        self.fleet = fleet
        self.answers: dict[str, str] = {}

    def keep(self, label: str, result: ToolResult) -> dict[str, Any]:
        assert label not in self.answers, label
        self.answers[label] = _wire(result.to_json(), self.fleet.root)
        return dict(result.result or {})

    async def call(self, label: str, tool: str, caller: Caller, **args: Any) -> dict[str, Any]:
        return self.keep(label, await self.fleet.call(tool, caller, **args))

    async def views(self, label: str) -> None:
        """``fleet_list`` and the ``GET /v1/fleet`` body of every scope."""
        for caller in (OPERATOR, LEAD, LEAD_B):
            await self.call(f"{label}/fleet_list/{caller.name}", "fleet_list", caller)
            body = (await self.fleet.service.views.encoded(caller)).body
            self.answers[f"{label}/GET/{caller.name}"] = _rooted(body.decode(), self.fleet.root)


async def _troubled(root: Path, rec: dict[str, str]) -> None:
    """Records held in memory for a lead and entries the inbox could not decode, as each
    scope's fleet view shows them."""
    inbox = TroubledInbox()
    fleet = build_test_fleet(root / "troubled", inbox=inbox)
    await fleet.service.own_lead_keys()
    inbox.down = True
    for n, (lead, kind) in enumerate(
        (("lead-b", MessageKind.REPLY), ("lead", MessageKind.REPLY), ("lead-b", MessageKind.REPLY))
    ):
        await fleet.bridge.outbox.keep(
            InboxRecord(
                msg_id=f"{lead}-{n}",
                kind=kind,
                target=f"m-{n}",
                recipient_lead=lead,
                content="held",
                created_at_epoch_millis=1_000 * (n + 1),
            )
        )
    inbox.bad = [
        DecodeFailure(
            key=key,
            reason=reason,
            disposition=Disposition.QUARANTINED,
            message_id=message_id,
            version=version,
            detail="redacted",
            first_seen_epoch_millis=1_000,
            last_seen_epoch_millis=2_000,
            occurrences=2,
        )
        for key, message_id, reason, version in (
            ("lead-b", "b-1", DecodeReason.MALFORMED_JSON, 1),
            ("lead", "a-1", DecodeReason.MISSING_FIELD, None),
        )
    ]
    recorder = _Recorder(fleet)
    await recorder.views("troubled")
    rec.update(recorder.answers)


async def _routed(root: Path, rec: dict[str, str]) -> None:
    """A reply lead-b leaves uncollected until it is stranded, and lead-b unresponsive: the
    incidents routed to a peer (routing, on whose behalf) and the foreign incidents lead holds."""
    document = sample_document(root / "routed")
    document["health"] = {"enabled": True, "leadUnresponsiveAfterSeconds": 120}
    fleet = build_test_fleet(root / "routed", document=document)
    await fleet.service.own_lead_keys()
    own = (await fleet.ok("fleet_spawn", LEAD, profile="codex"))["sessionId"]
    await fleet.service.registry.contact(fleet.member(own))
    other = (await fleet.ok("fleet_spawn", LEAD_B, profile="codex"))["sessionId"]
    await fleet.service.registry.contact(fleet.member(other))
    await fleet.ok("fleet_send", LEAD_B, target=other, prompt="x")
    await fleet.ok("fleet_reply", fleet.member(other), content="done")
    for _ in range(10):
        fleet.clock.advance(31)
        await fleet.service.push.push_once()
        await fleet.service.health.tick()
    await fleet.ok("fleet_poll", LEAD)
    recorder = _Recorder(fleet)
    await recorder.views("routed")
    rec.update(recorder.answers)


async def _script(root: Path, catalog: FakeModelCatalog) -> dict[str, str]:
    document = sample_document(root)
    document["health"] = {"enabled": True}
    document["providers"] = [{"name": "prov", "baseUrl": "http://catalog.invalid/v1"}]
    document["profiles"]["sonnet"] |= {"model": "sonnet-4", "provider": "prov"}
    fleet = build_test_fleet(root, document=document, catalog=catalog)
    await fleet.service.own_lead_keys()
    await fleet.service.models.step()
    await fleet.service.observe_herdr()
    rec = _Recorder(fleet)

    one = (await rec.call("spawn/one", "fleet_spawn", LEAD, profile="sonnet", role="tests"))[
        "sessionId"
    ]
    two = (await rec.call("spawn/two", "fleet_spawn", LEAD, profile="sonnet", name="two"))[
        "sessionId"
    ]
    three = (await rec.call("spawn/three", "fleet_spawn", LEAD_B, profile="codex"))["sessionId"]
    await rec.call("spawn/refused", "fleet_spawn", LEAD, profile="sonnet")
    for sid in (one, two, three):
        await fleet.service.registry.contact(fleet.member(sid))
    await fleet.poll()
    await rec.views("ready")

    sent = await rec.call("send/one", "fleet_send", LEAD, target=one, prompt="write the tests")
    await fleet.poll()
    fleet.set_status(one, AgentStatus.WORKING)
    await fleet.poll()
    await rec.call("status/one-working", "fleet_status", LEAD, sessionId=one)
    await rec.call("send/two", "fleet_send", LEAD, target=two, prompt="read the spec")
    await rec.call("send/two-queued", "fleet_send", LEAD, target=two, prompt="then summarise")
    await fleet.poll()
    await rec.call("reply/one", "fleet_reply", fleet.member(one), content="done: 12 tests")
    await rec.call("reply/one-again", "fleet_reply", fleet.member(one), content="and one more")
    await rec.call("poll/ticket", "fleet_poll", LEAD, ticket=sent["ticket"])
    await rec.call("poll/inbox", "fleet_poll", LEAD)
    fleet.clock.advance(30)
    await fleet.service.push.push_once()
    await fleet.service.health.tick()
    await rec.views("busy")

    catalog.lists("prov", {"other": None})
    fleet.clock.advance(300)
    await fleet.service.models.step()
    await fleet.poll()
    await rec.call("send/benched", "fleet_send", LEAD, target=one, prompt="one more")
    await rec.call("status/benched", "fleet_status", LEAD, sessionId=one)
    await fleet.service.health.tick()
    await rec.views("benched")

    await rec.call("stop/two", "fleet_stop", LEAD, sessionId=two)
    await rec.call("stop/two-again", "fleet_stop", LEAD, sessionId=two)
    await rec.call("status/two-released", "fleet_status", LEAD, sessionId=two)
    await rec.call("stop/three", "fleet_stop", LEAD_B, sessionId=three)
    fleet.clock.advance(5)
    await rec.views("stopped")

    # a second run on the same herdr: member one, never released, is an orphan of the first
    again = build_test_fleet(root, document=document, catalog=catalog, control=fleet.control)
    await again.service.own_lead_keys()
    await again.service.observe_herdr()
    again.clock.advance(7)
    rec.fleet = again
    await rec.views("restarted")
    await rec.call("stop/orphan", "fleet_stop", LEAD, paneId="w3:p1")
    await _troubled(root, rec.answers)
    await _routed(root, rec.answers)
    return rec.answers


@pytest.fixture
def fixed_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every random id fleetd makes (sessions, runs, turns, nonces) from one counter."""
    counter = itertools.count(1)

    def token_hex(nbytes: int | None = None) -> str:
        return f"{next(counter):0{2 * (nbytes or 32)}x}"

    monkeypatch.setattr(secrets, "token_hex", token_hex)


@pytest.mark.usefixtures("fixed_ids")
async def test_every_answer_keeps_its_bytes(tmp_path: Path) -> None:
    """Each tool answer and each scope's fleet view of the script is byte for byte what the
    hand-built answers gave (the golden file), so building them from models changed no byte."""
    catalog = FakeModelCatalog()
    catalog.lists("prov", {"sonnet-4": None})
    answers = await _script(tmp_path, catalog)
    if os.environ.get("FLEETD_WRITE_GOLDEN"):
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(answers, indent=1, ensure_ascii=False) + "\n")
    golden: dict[str, str] = json.loads(GOLDEN.read_text())
    assert list(answers) == list(golden)
    for label, text in answers.items():
        assert text == golden[label], label


def test_the_script_covers_every_optional_part(tmp_path: Path) -> None:
    """The golden file holds the optional parts a hand-built answer could drop or reorder: an
    open turn, idle and released members, a model-health flag, a branch, an already-stopped
    member, a late reply, a drained inbox, orphans' absence and preserved worktrees."""
    golden: dict[str, str] = json.loads(GOLDEN.read_text())
    text = "\n".join(golden.values())
    for part in (
        '"openTurn"',
        '"idleForSeconds"',
        '"releasedCause"',
        '"modelHealth"',
        '"branch"',
        '"orphanedForSeconds"',
        '"messages":[{',
        '"preservedWorktrees"',
        '"worktree"',
        '"health":{',
        '"incidents"',
        '"dependencies"',
        '"byLead":{"lead":1,"lead-b":2}',
        '"failures":[{',
        '"routing":{',
        '"onBehalfOf":"lead-b"',
        '"foreignIncidents":[{',
    ):
        assert part in text, part
