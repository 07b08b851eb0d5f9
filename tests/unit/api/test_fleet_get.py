"""GET /v1/fleet: one encoding per version and scope, ETag and 304, and the long-poll."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from jsonschema import Draft202012Validator

from fleetd.api.app import create_app
from fleetd.api.http_tools import MAX_WAITS_PER_CALLER
from fleetd.testing import LEAD_TOKEN, OPERATOR_TOKEN, TestFleet, build_test_fleet

RESULT_SCHEMA = (
    Path(__file__).resolve().parents[3] / "contracts" / "api" / "fleet_list.result.schema.json"
)
LEAD = {"Authorization": f"Bearer {LEAD_TOKEN}"}
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}


@pytest.fixture
async def fleet(tmp_path: Path) -> TestFleet:
    built = build_test_fleet(tmp_path)
    await built.service.own_lead_keys()
    await built.service.observe_herdr()
    return built


@pytest.fixture
async def client(fleet: TestFleet) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(fleet.service))
    async with httpx.AsyncClient(transport=transport, base_url="http://fleetd") as opened:
        yield opened


async def test_an_unchanged_view_is_not_sent_twice(
    fleet: TestFleet, client: httpx.AsyncClient
) -> None:
    """The answer names its version in a strong ETag; If-None-Match with it gets 304 and no body
    until the fleet changes; each scope has its own tag."""
    first = await client.get("/v1/fleet", headers=OPERATOR)
    assert first.status_code == 200
    etag = first.headers["etag"]
    version = first.json()["result"]["viewVersion"]
    assert etag == f'"{fleet.service.run}-{version}-operator"'
    assert first.headers["cache-control"] == "private, no-cache"
    again = await client.get("/v1/fleet", headers={**OPERATOR, "If-None-Match": f"W/{etag}"})
    assert (again.status_code, again.content, again.headers["etag"]) == (304, b"", etag)
    lead = await client.get("/v1/fleet", headers={**LEAD, "If-None-Match": etag})
    assert lead.status_code == 200
    assert lead.headers["etag"] == f'"{fleet.service.run}-{version}-lead.lead"'
    await fleet.spawn_ready()
    changed = await client.get("/v1/fleet", headers={**OPERATOR, "If-None-Match": etag})
    assert changed.status_code == 200
    assert changed.json()["result"]["viewVersion"] > version
    schema = Draft202012Validator(json.loads(RESULT_SCHEMA.read_text(encoding="utf-8")))
    for answer in (first, lead, changed):
        assert [e.message for e in schema.iter_errors(answer.json()["result"])] == []


async def test_get_and_the_tool_answer_the_same_view(
    fleet: TestFleet, client: httpx.AsyncClient
) -> None:
    """GET /v1/fleet and POST /v1/tools/fleet_list answer the same document, and both count."""
    await fleet.spawn_ready()
    got = (await client.get("/v1/fleet", headers=LEAD)).json()
    posted = (await client.post("/v1/tools/fleet_list", headers=LEAD, json={})).json()
    assert got == posted
    metrics = (await client.get("/metrics")).text
    assert 'fleetd_tool_calls_total{outcome="ok",tool="fleet_list"} 2.0' in metrics


async def test_a_long_poll_answers_when_the_version_moves(
    fleet: TestFleet, client: httpx.AsyncClient
) -> None:
    """?sinceVersion=N&wait=S holds the answer while the view is version N; a change answers it."""
    version = (await client.get("/v1/fleet", headers=LEAD)).json()["result"]["viewVersion"]
    ahead = await client.get(f"/v1/fleet?sinceVersion={version + 1}&wait=30", headers=LEAD)
    assert ahead.json()["result"]["viewVersion"] == version  # another version: at once
    polling = asyncio.ensure_future(
        client.get(f"/v1/fleet?sinceVersion={version}&wait=30", headers=LEAD)
    )
    for _ in range(20):
        await asyncio.sleep(0)
    assert not polling.done()
    await fleet.spawn_ready()
    await fleet.clock.run(0.3, step=0.05)  # the spacing after the build of the version it held
    answer = await asyncio.wait_for(polling, 5)
    assert answer.json()["result"]["viewVersion"] > version
    assert len(answer.json()["result"]["members"]) == 1


async def test_a_stopping_fleetd_lets_a_long_poll_go(
    fleet: TestFleet, client: httpx.AsyncClient
) -> None:
    """A long-poll with nothing changing answers at once when fleetd is asked to stop."""
    first = await client.get("/v1/fleet", headers=LEAD)
    version = first.json()["result"]["viewVersion"]
    polling = asyncio.ensure_future(
        client.get(
            f"/v1/fleet?sinceVersion={version}&wait=60",
            headers={**LEAD, "If-None-Match": first.headers["etag"]},
        )
    )
    for _ in range(20):
        await asyncio.sleep(0)
    fleet.service.stop_requested()
    answer = await asyncio.wait_for(polling, 5)
    assert answer.status_code == 304  # unchanged, and the caller holds it already


async def test_one_caller_holds_at_most_so_many_long_polls(
    fleet: TestFleet, client: httpx.AsyncClient
) -> None:
    """A lead holding ``MAX_WAITS_PER_CALLER`` long-polls gets 429 ``rate_limited`` with
    ``Retry-After`` for one more, while the operator's long-poll still waits; once they
    answer, the lead may wait again (one token held 5,000 waiters, and waking them held every
    other caller for seconds)."""
    version = (await client.get("/v1/fleet", headers=LEAD)).json()["result"]["viewVersion"]
    query = f"/v1/fleet?sinceVersion={version}&wait=60"
    held = [
        asyncio.ensure_future(client.get(query, headers=LEAD)) for _ in range(MAX_WAITS_PER_CALLER)
    ]
    operator = asyncio.ensure_future(client.get(query, headers=OPERATOR))
    for _ in range(50):
        await asyncio.sleep(0)
    refused = await client.get(query, headers=LEAD)
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["code"] == "rate_limited"
    assert not operator.done()
    assert not any(poll.done() for poll in held)
    fleet.service.stop_requested()  # every waiter answers at once
    answers = await asyncio.wait_for(asyncio.gather(*held, operator), 5)
    assert {a.status_code for a in answers} == {200}
    again = await client.get(f"/v1/fleet?sinceVersion={version}&wait=1", headers=LEAD)
    assert again.status_code == 200


@pytest.mark.parametrize(
    ("query", "path", "rule"),
    [
        ("sinceVersion=-1", "sinceVersion", "integer"),
        ("sinceVersion=abc", "sinceVersion", "integer"),
        ("sinceVersion=%C2%B2", "sinceVersion", "integer"),  # a superscript two: not a version
        ("sinceVersion=%D9%A3", "sinceVersion", "integer"),  # an Arabic-Indic three, likewise
        ("sinceVersion=1&wait=61", "wait", "number"),
        ("sinceVersion=1&wait=nan", "wait", "number"),
        ("sinceVersion=1&wait=%D9%A3", "wait", "number"),  # an Arabic-Indic three: not a wait
        ("sinceVersion=1&wait=1_0", "wait", "number"),
        ("wait=5", "sinceVersion", "since_version_required"),
        ("wait=0.5", "sinceVersion", "since_version_required"),
    ],
)
async def test_a_bad_long_poll_query_is_invalid_arguments(
    client: httpx.AsyncClient, query: str, path: str, rule: str
) -> None:
    """A query that is not a version and a bounded wait is refused with the query's schema."""
    answer = await client.get(f"/v1/fleet?{query}", headers=LEAD)
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["code"] == "invalid_arguments"
    assert [(e["path"], e["type"]) for e in error["hint"]["errors"]] == [(path, rule)]
    assert set(error["hint"]["schema"]["properties"]) == {"sinceVersion", "wait", "scope"}


async def test_a_member_token_is_still_forbidden(
    fleet: TestFleet, client: httpx.AsyncClient
) -> None:
    """A member may not read the fleet over GET either (the registry's own refusal)."""
    sid = await fleet.spawn_ready()
    session = fleet.bridge.reads.session(sid)
    assert session is not None
    assert session.pane_id is not None
    token = fleet.control.env_of(session.pane_id)["FLEETD_TOKEN"]
    answer = await client.get("/v1/fleet", headers={"Authorization": f"Bearer {token}"})
    assert (answer.status_code, answer.json()["error"]["code"]) == (403, "forbidden")


async def test_wait_zero_alone_answers_at_once_and_a_real_wait_without_a_version_is_documented(
    client: httpx.AsyncClient,
) -> None:
    """``?wait=0`` asks for no wait and gets the view; ``?wait=5`` with no sinceVersion is the 422
    that /openapi.json names for that query (a long-poll with no version would poll hot)."""
    zero = await client.get("/v1/fleet?wait=0", headers=LEAD)
    assert zero.status_code == 200
    assert zero.json()["result"]["version"] == 1
    refused = await client.get("/v1/fleet?wait=5", headers=LEAD)
    assert refused.status_code == 422
    document = (await client.get("/openapi.json")).json()
    operation = document["paths"]["/v1/fleet"]["get"]
    assert "wait is above 0 without sinceVersion" in operation["responses"]["422"]["description"]
    [wait] = [p for p in operation["parameters"] if p["name"] == "wait"]
    assert "needs sinceVersion" in wait["schema"]["description"]
