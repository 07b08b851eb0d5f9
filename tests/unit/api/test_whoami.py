"""``GET /v1/whoami`` on the app ``fleetd serve`` builds: the operator and a lead are named, a
member's token is refused with 403, a missing or unknown token with 401 and the reason; the answer
never holds the token, is never cached, and is documented in ``/openapi.json`` as answered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from fleetd.api.app import create_app
from fleetd.api.whoami import WHOAMI_PATH, WhoamiAnswer
from fleetd.testing import LEAD_TOKEN, OPERATOR_TOKEN, TestFleet, build_test_fleet


def _client(fleet: TestFleet) -> httpx.AsyncClient:
    app = create_app(fleet.service)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://fleetd")


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_whoami_names_the_operator_and_a_lead_and_never_the_token(tmp_path: Path) -> None:
    """200 with the role, and the lead's name for a lead; ``no-store``; no token in the body."""
    async with _client(build_test_fleet(tmp_path)) as http:
        operator = await http.get(WHOAMI_PATH, headers=_bearer(OPERATOR_TOKEN))
        lead = await http.get(WHOAMI_PATH, headers=_bearer(LEAD_TOKEN))
    assert operator.json() == {"ok": True, "result": {"role": "operator", "lead": None}}
    assert lead.json() == {"ok": True, "result": {"role": "lead", "lead": "lead"}}
    WhoamiAnswer.model_validate(lead.json())
    for answer in (operator, lead):
        assert answer.status_code == 200
        assert answer.headers["cache-control"] == "no-store"
    assert LEAD_TOKEN not in lead.text
    assert OPERATOR_TOKEN not in operator.text


async def test_whoami_refuses_a_missing_or_unknown_token_with_the_reason_and_a_member_with_403(
    tmp_path: Path,
) -> None:
    """No token, a malformed header or an unknown token: 401 ``unauthenticated`` with a bearer
    challenge and words saying which; a member's token: 403 ``forbidden``."""
    fleet = build_test_fleet(tmp_path)
    member = fleet.service.authenticator.mint_member_token("s-whoami", "m-whoami")
    async with _client(fleet) as http:
        missing = await http.get(WHOAMI_PATH)
        malformed = await http.get(WHOAMI_PATH, headers={"Authorization": "Basic x"})
        unknown = await http.get(WHOAMI_PATH, headers=_bearer("nope-nope"))
        refused = await http.get(WHOAMI_PATH, headers=_bearer(member))
    assert [a.status_code for a in (missing, malformed, unknown)] == [401, 401, 401]
    assert [a.json()["error"]["message"] for a in (missing, malformed, unknown)] == [
        "a bearer token is required",
        "the Authorization header must be 'Bearer <token>'",
        "the bearer token is not recognised",
    ]
    assert unknown.json()["error"]["code"] == "unauthenticated"
    assert missing.headers["www-authenticate"] == 'Bearer realm="fleetd"'
    assert unknown.headers["www-authenticate"].endswith('error="invalid_token"')
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "forbidden"
    assert member not in refused.text


async def test_whoami_is_in_the_openapi_document_with_its_answers(tmp_path: Path) -> None:
    """Behind the bearer scheme; 200 is the envelope of role and lead, 401 and 403 the failure
    envelope, 401 with ``WWW-Authenticate``."""
    async with _client(build_test_fleet(tmp_path)) as http:
        document: dict[str, Any] = (await http.get("/openapi.json")).json()
    operation = document["paths"][WHOAMI_PATH]["get"]
    assert operation["operationId"] == "whoami"
    assert operation["security"] == [{"bearer": []}]
    responses = operation["responses"]
    assert set(responses) == {"200", "401", "403"}
    failure = {"$ref": "#/components/schemas/ToolFailureAnswer"}
    for status in ("401", "403"):
        assert responses[status]["content"]["application/json"]["schema"] == failure
    assert "WWW-Authenticate" in responses["401"]["headers"]
    success = responses["200"]["content"]["application/json"]["schema"]
    answer = document["components"]["schemas"][success["$ref"].rsplit("/", 1)[1]]
    result = document["components"]["schemas"][
        answer["properties"]["result"]["$ref"].rsplit("/", 1)[1]
    ]
    assert result["properties"]["role"]["enum"] == ["operator", "lead"]
    assert result["additionalProperties"] is False
