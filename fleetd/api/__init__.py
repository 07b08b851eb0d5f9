"""The api: the HTTP app, its tool routes and MCP endpoint, bearer auth and the tool registry.

The names other fleetd packages build on are re-exported here; everything else in the package is
internal to it. Who is calling (``Caller``, ``Role``) is a domain value: import it from
:mod:`fleetd.identity`.
"""

from fleetd.api.app import create_app
from fleetd.api.auth import Authenticator
from fleetd.api.fleet_tools import register_fleet_tools
from fleetd.api.standby import StandbyHolder, create_standby_app
from fleetd.api.tools import INTERNAL_ERROR_CODE, ToolFailure, ToolRegistry, ToolResult

__all__ = [
    "INTERNAL_ERROR_CODE",
    "Authenticator",
    "StandbyHolder",
    "ToolFailure",
    "ToolRegistry",
    "ToolResult",
    "create_app",
    "create_standby_app",
    "register_fleet_tools",
]
