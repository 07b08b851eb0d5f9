"""Showing the effective config: ``render_effective`` and the ``fleetd check-config`` command.

The rendering is the config as fleetd will run it (defaults filled, floors applied, paths
resolved), in the same camelCase YAML the file uses. Secrets never appear: URL passwords print as
``***`` (the model's JSON serialisation masks them) and tokens are only ever named by their
environment variable.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

import yaml

from fleetd.config.loader import parse_config_file
from fleetd.config.model import FleetdConfig
from fleetd.errors import ConfigError

__all__ = ["CONFIG_ERROR_EXIT", "check_config_main", "render_effective"]

CONFIG_ERROR_EXIT = 2


def render_effective(config: FleetdConfig) -> str:
    """YAML of ``config`` with secrets masked."""
    document = config.model_dump(mode="json")
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=False, allow_unicode=True)


def check_config_main(
    argv: Sequence[str],
    *,
    environ: Mapping[str, str] | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """``fleetd check-config PATH``: print the effective config and warnings; 0 if valid, else 2.

    ``argv`` is the arguments after ``check-config``. The effective YAML goes to stdout, each
    warning to stderr as ``warning: ...``; an invalid config prints
    ``config error: <key>: <reason>`` to stderr.
    """
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    parser = argparse.ArgumentParser(
        prog="fleetd check-config",
        description="Validate a fleetd config file and print the effective configuration.",
    )
    parser.add_argument("path", type=Path, help="the YAML config file")
    try:
        args = parser.parse_args(list(argv))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else CONFIG_ERROR_EXIT
    try:
        loaded = parse_config_file(args.path, os.environ if environ is None else environ)
    except ConfigError as exc:
        print(f"config error: {exc.key}: {exc.reason}", file=err)
        return CONFIG_ERROR_EXIT
    out.write(render_effective(loaded.config))
    for warning in loaded.warnings:
        print(f"warning: {warning}", file=err)
    return 0
