"""``GET /v1/fleet?scope=all`` keeps its bytes while the models come to build it.

The scope=all document (``fleetd/runtime/fleet_all.py``) is not in
``tests/fixtures/answers/golden.json``; this pins the body the app sends for a fleet with a
ready member, against ``tests/fixtures/answers/scope_all.json``, written by this test against the
hand-built document. Regenerate only for an additive change:
``FLEETD_WRITE_GOLDEN=1 pytest tests/unit/api/test_scope_all_bytes.py``.
"""

from __future__ import annotations

import itertools
import os
import secrets
import socket
from pathlib import Path

import httpx
import pytest

from fleetd.api.app import create_app
from fleetd.testing import OPERATOR_TOKEN, build_test_fleet

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "answers" / "scope_all.json"
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}


async def test_the_scope_all_body_keeps_its_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The body, with the temporary root named ``<root>``, every random id from one counter and
    the host named ``golden-host``, is the golden file's text."""
    counter = itertools.count(1)

    def token_hex(nbytes: int | None = None) -> str:
        return f"{next(counter):0{2 * (nbytes or 32)}x}"

    monkeypatch.setattr(secrets, "token_hex", token_hex)
    monkeypatch.setattr(socket, "gethostname", lambda: "golden-host")
    fleet = build_test_fleet(tmp_path)
    await fleet.service.own_lead_keys()
    await fleet.service.observe_herdr()
    await fleet.spawn_ready()
    transport = httpx.ASGITransport(app=create_app(fleet.service))
    async with httpx.AsyncClient(transport=transport, base_url="http://fleetd") as client:
        answer = await client.get("/v1/fleet", params={"scope": "all"}, headers=OPERATOR)
    assert answer.status_code == 200
    body = answer.content.decode().replace(str(tmp_path), "<root>")
    if os.environ.get("FLEETD_WRITE_GOLDEN"):
        GOLDEN.write_text(body + "\n", encoding="utf-8")
    assert body + "\n" == GOLDEN.read_text(encoding="utf-8")
