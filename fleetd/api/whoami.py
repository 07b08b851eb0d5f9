"""``GET /v1/whoami``: who a bearer token stands for, so a client can say whose view it shows.

The live page (:mod:`fleetd.api.page`) and the terminal (:mod:`fleetd.term`) both ask it rather
than guess from the shape of a ``fleet_list`` answer. Answers use the tool routes' envelope:

=====  ========================================================================================
200    ``{"ok": true, "result": {"role": "operator", "lead": null}}``, or for a lead's token
       ``{"role": "lead", "lead": "<its name>"}``
401    missing or unknown bearer token (``unauthenticated``, with the reason:
       no token, not ``Bearer <token>``, not recognised, a member token of a previous run;
       ``WWW-Authenticate: Bearer``)
403    a member's token (``forbidden``): the fleet is read by the operator and the leads
=====  ========================================================================================

The answer never holds the token and is never cached (``Cache-Control: no-store``).
"""

from __future__ import annotations

from typing import Literal

from fastapi import FastAPI, Security
from pydantic import BaseModel, ConfigDict
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from fleetd.api.auth import BEARER_SCHEME, Authenticator, bearer_challenge
from fleetd.api.failures import failure_responses
from fleetd.api.tools import Role, ToolFailure, ToolResult, failure_from_error
from fleetd.errors import AuthError

__all__ = ["WHOAMI_PATH", "Whoami", "WhoamiAnswer", "install_whoami"]

WHOAMI_PATH = "/v1/whoami"
_NO_STORE = {"Cache-Control": "no-store"}

_STATUSES = {
    401: "missing or unknown bearer token (unauthenticated; the message says why)",
    403: "a member's token: only the operator and the leads read the fleet (forbidden)",
}


class Whoami(BaseModel):
    """Who the token stands for: the operator (``lead`` null) or a lead (``lead``: its name)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Literal["operator", "lead"]
    lead: str | None


class WhoamiAnswer(BaseModel):
    """The success envelope of ``GET /v1/whoami``."""

    ok: Literal[True]
    result: Whoami


def _refuse(
    code: str, message: str, status: int, headers: dict[str, str] | None = None
) -> JSONResponse:
    failure = ToolFailure(code=code, message=message, http_status=status)
    return JSONResponse(
        ToolResult.failure(failure).to_json(),
        status_code=status,
        headers={**_NO_STORE, **(headers or {})},
    )


def install_whoami(app: FastAPI, authenticator: Authenticator) -> None:
    """Add ``GET /v1/whoami`` to ``app`` (and to its ``/openapi.json``)."""

    @app.get(
        WHOAMI_PATH,
        response_model=WhoamiAnswer,
        response_description="ok",
        operation_id="whoami",
        responses=failure_responses(_STATUSES),
        tags=["callers"],
        summary="who the bearer token stands for",
        description="The role of the token's caller, operator or lead, and a lead's name: what "
        "fleet_list and GET /v1/incidents show it (a lead: its own part). Callers: operator, "
        "lead.",
        dependencies=[Security(BEARER_SCHEME)],
    )
    async def whoami(request: Request) -> Response:
        header = request.headers.get("authorization")
        try:
            caller = authenticator.authenticate(header)
        except AuthError as error:
            failure = failure_from_error(error)
            challenge = {"WWW-Authenticate": bearer_challenge(presented=bool(header))}
            return _refuse(failure.code, failure.message, 401, challenge)
        if caller.role is Role.OPERATOR:
            result = Whoami(role="operator", lead=None)
        elif caller.role is Role.LEAD:
            result = Whoami(role="lead", lead=caller.name)
        else:
            return _refuse(
                "forbidden", "a member's token: only the operator and the leads read the fleet", 403
            )
        answer = WhoamiAnswer(ok=True, result=result)
        return Response(answer.model_dump_json(), media_type="application/json", headers=_NO_STORE)
