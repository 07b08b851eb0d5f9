"""The public names of the api modules are pinned: others build on exactly these."""

from __future__ import annotations

from types import ModuleType

import pytest

from fleetd.api import auth, envelope, http_tools, mcp_server, schemas, tool_routes, tools

EXPORTS: dict[ModuleType, set[str]] = {
    tools: {
        "INTERNAL_ERROR_CODE",
        "Caller",
        "ContactHook",
        "ResultHook",
        "Role",
        "ToolAnswer",
        "ToolFailure",
        "ToolParams",
        "ToolRegistry",
        "ToolResult",
        "ToolSpec",
        "failure_from_error",
    },
    envelope: {
        "ENVELOPE_HEADER",
        "ToolErrorBody",
        "ToolFailureAnswer",
        "envelope_schema",
        "output_schema",
        "success_model",
    },
    tool_routes: {
        "ERROR_STATUSES",
        "FLEET_QUERY_SCHEMA",
        "FLEET_SCOPES",
        "MAX_FLEET_WAIT_SECONDS",
        "Handler",
        "RegistryRoute",
        "fleet_route",
        "tool_route",
    },
    auth: {"BEARER_SCHEME", "OPERATOR_NAME", "Authenticator", "bearer_challenge", "bearer_token"},
    http_tools: {
        "DEFAULT_TOOL_BODY_LIMIT",
        "FLEET_PATH",
        "MAX_WAITS_PER_CALLER",
        "TOOLS_PATH",
        "FleetAcrossView",
        "FleetVersions",
        "VersionedFleet",
        "install_tool_routes",
    },
    mcp_server: {
        "CALLER_SCOPE_KEY",
        "DEFAULT_MCP_BODY_LIMIT",
        "McpAuthGate",
        "build_mcp_server",
        "install_mcp",
    },
    schemas: {
        "ENVELOPE_FILE",
        "FLEET_ALL_FILE",
        "JSON_SCHEMA_DIALECT",
        "assert_schemas_match",
        "export_schemas",
        "render_schemas",
        "schema_drift",
    },
}


@pytest.mark.parametrize("module", list(EXPORTS), ids=lambda m: m.__name__)
def test_exports_are_pinned_and_defined(module: ModuleType) -> None:
    """Each module's __all__ is exactly the pinned set, and every name exists."""
    assert set(module.__all__) == EXPORTS[module]
    for name in module.__all__:
        assert hasattr(module, name)
