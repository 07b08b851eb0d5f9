"""Socket path resolution in herdr's own order."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetd.errors import ConfigError
from fleetd.herdr.discovery import resolve_socket_path

HOME = Path("/home/u")


@pytest.mark.parametrize(
    ("explicit", "environ", "expected"),
    [
        (None, {}, "/home/u/.config/herdr/herdr.sock"),
        (None, {"XDG_CONFIG_HOME": "/x"}, "/x/herdr/herdr.sock"),
        (None, {"HERDR_SESSION": "default"}, "/home/u/.config/herdr/herdr.sock"),
        (None, {"HERDR_SESSION": "team-a"}, "/home/u/.config/herdr/sessions/team-a/herdr.sock"),
        (
            None,
            {"HERDR_SESSION": "b.1", "XDG_CONFIG_HOME": "/x"},
            "/x/herdr/sessions/b.1/herdr.sock",
        ),
        (None, {"HERDR_SOCKET_PATH": "/s.sock", "HERDR_SESSION": "a"}, "/s.sock"),
        ("/cfg.sock", {"HERDR_SOCKET_PATH": "/s.sock", "HERDR_SESSION": "a"}, "/cfg.sock"),
        (
            None,
            {"HERDR_SOCKET_PATH": "", "HERDR_SESSION": "a"},
            "/home/u/.config/herdr/sessions/a/herdr.sock",
        ),
        (None, {"HERDR_ENV": "1"}, "/home/u/.config/herdr/herdr.sock"),
    ],
)
def test_resolution_order(explicit: str | None, environ: dict[str, str], expected: str) -> None:
    """explicit > HERDR_SOCKET_PATH > HERDR_SESSION (default = default socket) > config dir."""
    assert resolve_socket_path(environ=environ, home=HOME, explicit=explicit) == Path(expected)


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "x" * 65, "sp ace", "ü"])
def test_invalid_session_name_is_a_config_error(name: str) -> None:
    """Session names herdr would refuse raise ConfigError naming HERDR_SESSION."""
    with pytest.raises(ConfigError) as info:
        resolve_socket_path(environ={"HERDR_SESSION": name}, home=HOME)
    assert info.value.key == "HERDR_SESSION"


def test_never_points_at_the_binary_client_socket() -> None:
    """The JSON API socket is herdr.sock, never herdr-client.sock."""
    assert resolve_socket_path(environ={}, home=HOME).name == "herdr.sock"
