"""Where herdr's JSON API socket lives, resolved exactly the way herdr itself resolves it.

herdr (``src/session.rs::active_api_socket_path`` and ``src/config/io.rs::config_dir``) looks, in
order, at: an explicit choice, ``HERDR_SOCKET_PATH`` (a full path), ``HERDR_SESSION=<name>``
(``<config_dir>/sessions/<name>/herdr.sock``; ``default`` means the default session), and finally
``<config_dir>/herdr.sock``. ``<config_dir>`` is ``$XDG_CONFIG_HOME/herdr`` whenever
``XDG_CONFIG_HOME`` is set (herdr does not ignore an empty value, neither do we), else
``$HOME/.config/herdr``. An invalid session name is refused, as herdr's CLI refuses it.

One deliberate difference: an *empty* ``HERDR_SOCKET_PATH`` counts as unset (herdr would use the
empty path, which can never connect). The socket file does not need to exist: herdr may start
later, and the client connects per call. ``herdr-client.sock`` is the binary TUI protocol and is
never returned. Pure function: the environment and the home directory are arguments.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from fleetd.errors import ConfigError

__all__ = ["DEFAULT_SESSION", "config_dir", "resolve_socket_path", "validate_session_name"]

DEFAULT_SESSION = "default"
_SESSION_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
_SOCKET_NAME = "herdr.sock"


def validate_session_name(name: str) -> None:
    """Raise :class:`ConfigError` unless ``name`` is a session name herdr accepts."""
    if name in (".", "..") or not _SESSION_NAME.fullmatch(name):
        raise ConfigError(
            "HERDR_SESSION",
            "session name must be 1-64 ASCII letters, digits, '.', '_' or '-', not . or ..",
        )


def config_dir(environ: Mapping[str, str], home: Path) -> Path:
    """herdr's config directory for this environment."""
    xdg = environ.get("XDG_CONFIG_HOME")
    if xdg is not None:
        return Path(xdg) / "herdr"
    return home / ".config" / "herdr"


def resolve_socket_path(
    *,
    environ: Mapping[str, str],
    home: Path,
    explicit: str | Path | None = None,
) -> Path:
    """The API socket path: ``explicit`` > ``HERDR_SOCKET_PATH`` > ``HERDR_SESSION`` > default."""
    if explicit is not None and str(explicit):
        return Path(explicit)
    override = environ.get("HERDR_SOCKET_PATH")
    if override:
        return Path(override)
    base = config_dir(environ, home)
    session = environ.get("HERDR_SESSION")
    if session is not None and session != DEFAULT_SESSION:
        validate_session_name(session)
        return base / "sessions" / session / _SOCKET_NAME
    return base / _SOCKET_NAME
