"""fleetd configuration: parsed once at the edge into a frozen, typed object.

``load_config(path, environ)`` reads the YAML file (camelCase keys as in the spec), applies
``FLEETD_<SECTION>__<KEY>`` overrides, validates everything and returns a :class:`LoadedConfig`:
the :class:`FleetdConfig` plus warnings (a value below a compiled floor is raised to it, never the
other way). A bad key, type or file raises :class:`fleetd.errors.ConfigError` naming the dotted
key. :class:`ConfigRef` holds the live config and applies valid edits of hot keys at runtime;
:mod:`fleetd.config.floors` holds the limits no config can loosen.

Modules: ``floors`` (compiled limits), ``fields`` (base model, strict types, floor clamp),
``sections`` and ``model`` (the schema), ``keys`` (dotted names), ``env`` (overrides),
``loader`` (the edge), ``ref`` (live reload), ``render`` (``check-config``).

Names are re-exported lazily so that pure code importing :mod:`fleetd.config.floors` does not pull
in pydantic, YAML, logging or sockets.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fleetd.config.env import env_name
    from fleetd.config.floors import (
        FIRST_PROBE_FLOOR,
        FLOORS,
        MAX_PANE_READS_PER_TICK,
        PANE_COOLDOWN_FLOOR,
        TWO_SNAPSHOTS,
    )
    from fleetd.config.loader import (
        FileFingerprint,
        LoadedConfig,
        load_config,
        parse_config,
        parse_config_file,
    )
    from fleetd.config.model import (
        RESTART_KEYS,
        FleetdConfig,
        HealthConfig,
        NotificationMode,
        NotificationsConfig,
        RepairConfig,
    )
    from fleetd.config.ref import ConfigRef, ConfigStatus, ReloadResult, ReloadStatus
    from fleetd.config.render import check_config_main, render_effective
    from fleetd.config.sections import (
        AgentKind,
        AmqpConfig,
        ApiConfig,
        BridgeConfig,
        HerdrConfig,
        InboxBackend,
        InboxConfig,
        JournalConfig,
        LeadConfig,
        ProfileConfig,
        PushConfig,
        WorktreesConfig,
    )

__all__ = [
    "FIRST_PROBE_FLOOR",
    "FLOORS",
    "MAX_PANE_READS_PER_TICK",
    "PANE_COOLDOWN_FLOOR",
    "RESTART_KEYS",
    "TWO_SNAPSHOTS",
    "AgentKind",
    "AmqpConfig",
    "ApiConfig",
    "BridgeConfig",
    "ConfigRef",
    "ConfigStatus",
    "FileFingerprint",
    "FleetdConfig",
    "HealthConfig",
    "HerdrConfig",
    "InboxBackend",
    "InboxConfig",
    "JournalConfig",
    "LeadConfig",
    "LoadedConfig",
    "NotificationMode",
    "NotificationsConfig",
    "ProfileConfig",
    "PushConfig",
    "ReloadResult",
    "ReloadStatus",
    "RepairConfig",
    "WorktreesConfig",
    "check_config_main",
    "env_name",
    "load_config",
    "parse_config",
    "parse_config_file",
    "render_effective",
]

_HOME: dict[str, str] = {
    "FIRST_PROBE_FLOOR": "floors",
    "FLOORS": "floors",
    "MAX_PANE_READS_PER_TICK": "floors",
    "PANE_COOLDOWN_FLOOR": "floors",
    "RESTART_KEYS": "model",
    "TWO_SNAPSHOTS": "floors",
    "AgentKind": "sections",
    "AmqpConfig": "sections",
    "ApiConfig": "sections",
    "BridgeConfig": "sections",
    "ConfigRef": "ref",
    "ConfigStatus": "ref",
    "FileFingerprint": "loader",
    "FleetdConfig": "model",
    "HealthConfig": "model",
    "HerdrConfig": "sections",
    "InboxBackend": "sections",
    "InboxConfig": "sections",
    "JournalConfig": "sections",
    "LeadConfig": "sections",
    "LoadedConfig": "loader",
    "NotificationMode": "model",
    "NotificationsConfig": "model",
    "RepairConfig": "model",
    "ProfileConfig": "sections",
    "PushConfig": "sections",
    "ReloadResult": "ref",
    "ReloadStatus": "ref",
    "WorktreesConfig": "sections",
    "check_config_main": "render",
    "env_name": "env",
    "load_config": "loader",
    "parse_config": "loader",
    "parse_config_file": "loader",
    "render_effective": "render",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
