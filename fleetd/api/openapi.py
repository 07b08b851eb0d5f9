"""The fleet tools in ``/openapi.json``: one operation per tool, built from the registry.

The tool routes are generic (``POST /v1/tools/{name}`` dispatches by name), so FastAPI cannot see
what each tool takes or answers. :func:`install_tool_openapi` adds to the app's document, for every
registered tool, ``POST /v1/tools/<tool>`` (and ``GET /v1/fleet`` for ``fleet_list``, with its
``sinceVersion``/``wait`` long-poll, ``If-None-Match``, the ``ETag`` it answers and ``304``) with:

* the request body: the tool's params schema (``contracts/api/<tool>.params.schema.json``),
* ``200``: the success envelope ``{"ok": true, "result": <tool>.result.schema.json}``,
* every error status the HTTP transport answers (:mod:`fleetd.api.http_tools`), each with the
  failure envelope of ``contracts/api/tool-result.v1.schema.json``,
* the bearer scheme as ``components.securitySchemes.bearer``.

Each contract schema becomes ``components.schemas["<tool>.params"]`` / ``["<tool>.result"]``; its
``$defs`` move beside it as ``"<tool>.params.<Name>"`` with the references rewritten, so the
schemas stay those of the contract files (a test rebuilds the files from the document). The
failure envelope is :mod:`fleetd.api.envelope`'s; a test pins it to the file.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from fleetd.api.envelope import FAILURE_DEFS, FAILURE_ENVELOPE, closed_object
from fleetd.api.tools import ToolRegistry, ToolSpec

__all__ = [
    "ERROR_STATUSES",
    "FAILURE_PREFIX",
    "FLEET_QUERY_SCHEMA",
    "MAX_FLEET_WAIT_SECONDS",
    "install_tool_openapi",
    "tool_operations",
]

FAILURE_PREFIX = "tool-result"
_COMPONENTS = "#/components/schemas/"
_BEARER = "bearer"

#: Every error status of a tool call over HTTP, as :mod:`fleetd.api.http_tools` documents them.
ERROR_STATUSES: dict[int, str] = {
    400: "the body is not JSON, or not a JSON object (invalid_body)",
    401: "missing or unknown bearer token (unauthenticated)",
    403: "the caller's role may not call the tool (forbidden)",
    404: "no such tool, target or ticket (unknown_tool, unknown_target, unknown_ticket, "
    "ticket_expired)",
    409: "the session's state or capacity refuses the call (conflict, capacity_exceeded, "
    "profile_benched, ...)",
    413: "the body is larger than the limit (body_too_large)",
    422: "the arguments do not match the tool's schema (invalid_arguments)",
    500: "the tool failed inside fleetd (internal_error; no exception text)",
    503: "a dependency (herdr, the inbox) cannot be reached now (unavailable, ...)",
}
# GET /v1/fleet reads no body and names its tool: no 400, 404 or 413; 422 is a bad query.
_FLEET_STATUSES = (401, 403, 409, 422, 500, 503)
_FLEET_QUERY_REFUSED = (
    "the query is refused (invalid_arguments): sinceVersion is not a version, wait is outside "
    "0-60, or wait is above 0 without sinceVersion"
)

#: The longest ``GET /v1/fleet?sinceVersion=N&wait=S`` holds its caller.
MAX_FLEET_WAIT_SECONDS = 60.0

#: The query of ``GET /v1/fleet`` (the ``invalid_arguments`` hint repeats it).
FLEET_QUERY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "sinceVersion": {
            "type": "integer",
            "minimum": 0,
            "maximum": 10**18 - 1,
            "description": "the viewVersion the caller has; with wait, the answer waits while "
            "the view is still that version",
        },
        "wait": {
            "type": "number",
            "minimum": 0,
            "maximum": MAX_FLEET_WAIT_SECONDS,
            "description": "seconds to wait for a version other than sinceVersion; above 0 it "
            "needs sinceVersion (else 422); a stopping fleetd answers at once",
        },
    },
}

_ETAG = {
    "ETag": {
        "description": "names this view: its run of fleetd, its viewVersion and the caller's scope",
        "schema": {"type": "string"},
    }
}


def _relocated(value: Any, prefix: str) -> Any:
    """``value`` with every ``#/$defs/<Name>`` reference pointing at ``<prefix>.<Name>``."""
    if isinstance(value, dict):
        return {
            key: (
                _COMPONENTS + prefix + "." + item.removeprefix("#/$defs/")
                if key == "$ref" and isinstance(item, str) and item.startswith("#/$defs/")
                else _relocated(item, prefix)
            )
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_relocated(item, prefix) for item in value]
    return value


def _component(schemas: dict[str, Any], name: str, schema: dict[str, Any]) -> dict[str, str]:
    """Store ``schema`` as component ``name`` (its ``$defs`` beside it); a reference to it."""
    body = {key: value for key, value in schema.items() if key != "$defs"}
    schemas[name] = _relocated(body, name)
    for def_name, definition in schema.get("$defs", {}).items():
        schemas[f"{name}.{def_name}"] = _relocated(definition, name)
    return {"$ref": _COMPONENTS + name}


def _responses(success: dict[str, Any], statuses: tuple[int, ...]) -> dict[str, Any]:
    failure = {"application/json": {"schema": {"$ref": _COMPONENTS + FAILURE_PREFIX}}}
    responses: dict[str, Any] = {
        "200": {"description": "ok", "content": {"application/json": {"schema": success}}}
    }
    for status in statuses:
        responses[str(status)] = {"description": ERROR_STATUSES[status], "content": failure}
    responses["401"]["headers"] = {
        "WWW-Authenticate": {"description": "Bearer", "schema": {"type": "string"}}
    }
    return responses


def _operation(spec: ToolSpec[Any], schemas: dict[str, Any], *, body: bool) -> dict[str, Any]:
    result: dict[str, Any] = {"type": "object"}
    if spec.result is not None:
        result = _component(schemas, spec.name + ".result", spec.result.model_json_schema())
    success = closed_object(["ok", "result"], {"ok": {"const": True}, "result": result})
    roles = ", ".join(sorted(spec.roles))
    operation: dict[str, Any] = {
        "operationId": spec.name if body else spec.name + "_get",
        "summary": spec.name,
        "description": f"{spec.description}\n\nCallers: {roles}.",
        "tags": ["tools"],
        "security": [{_BEARER: []}],
    }
    if body:
        params = _component(schemas, spec.name + ".params", spec.params_schema())
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": params}},
        }
        operation["responses"] = _responses(success, tuple(ERROR_STATUSES))
    else:
        responses = _responses(success, _FLEET_STATUSES)
        responses["422"] = {**responses["422"], "description": _FLEET_QUERY_REFUSED}
        responses["200"]["headers"] = _ETAG
        responses["304"] = {
            "description": "not modified: If-None-Match names the current view (no body)",
            "headers": _ETAG,
        }
        operation["responses"] = responses
        operation["parameters"] = [
            *(
                {"name": name, "in": "query", "required": False, "schema": schema}
                for name, schema in FLEET_QUERY_SCHEMA["properties"].items()
            ),
            {
                "name": "If-None-Match",
                "in": "header",
                "required": False,
                "schema": {"type": "string"},
                "description": "an ETag of an earlier answer: 304 while the view is unchanged",
            },
        ]
    return operation


def tool_operations(
    registry: ToolRegistry, *, tools_path: str, fleet_path: str, fleet_tool: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``paths`` and ``components.schemas`` entries of every tool in ``registry``."""
    schemas: dict[str, Any] = {}
    _component(schemas, FAILURE_PREFIX, {**FAILURE_ENVELOPE, "$defs": FAILURE_DEFS})
    paths: dict[str, Any] = {}
    for spec in registry.specs():
        path = tools_path.replace("{name}", spec.name)
        paths[path] = {"post": _operation(spec, schemas, body=True)}
        if spec.name == fleet_tool:
            paths[fleet_path] = {"get": _operation(spec, schemas, body=False)}
    return paths, schemas


def install_tool_openapi(
    app: FastAPI, registry: ToolRegistry, *, tools_path: str, fleet_path: str, fleet_tool: str
) -> None:
    """Make ``app.openapi()`` document the tools of ``registry`` beside FastAPI's own routes."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = FastAPI.openapi(app)
            paths, schemas = tool_operations(
                registry, tools_path=tools_path, fleet_path=fleet_path, fleet_tool=fleet_tool
            )
            document.setdefault("paths", {}).update(paths)
            components = document.setdefault("components", {})
            components.setdefault("schemas", {}).update(schemas)
            components.setdefault("securitySchemes", {})[_BEARER] = {
                "type": "http",
                "scheme": "bearer",
                "description": "a lead's, the operator's or a member's token (FLEETD_TOKEN)",
            }
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
