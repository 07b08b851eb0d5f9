"""The webhook payload contract as a file: generated from the model, and a drift check.

``contracts/webhook/incident-event.v1.schema.json`` is the JSON Schema of
:class:`~fleetd.notify.payload.IncidentEvent`. It is generated, never edited: :func:`export_schema`
writes it, and :func:`schema_drift` / :func:`assert_schema_matches` tell a test when the model and
the file disagree, so the payload cannot change without its contract (the same arrangement as
the tool contracts in :mod:`fleetd.api.schemas`). Other files in the directory (README, samples)
are left alone.

From a shell::

    python -m fleetd.notify.contract contracts/webhook [--check]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Final

from fleetd.notify.payload import IncidentEvent

__all__ = [
    "JSON_SCHEMA_DIALECT",
    "SCHEMA_FILE",
    "assert_schema_matches",
    "export_schema",
    "render_schema",
    "schema_drift",
]

JSON_SCHEMA_DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_FILE: Final = "incident-event.v1.schema.json"


def render_schema() -> str:
    """The text of the payload's schema file."""
    schema = IncidentEvent.model_json_schema(by_alias=True, mode="serialization")
    return json.dumps({"$schema": JSON_SCHEMA_DIALECT, **schema}, indent=2, sort_keys=True) + "\n"


def export_schema(directory: Path) -> Path:
    """Write the schema file into ``directory`` and return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / SCHEMA_FILE
    path.write_text(render_schema(), encoding="utf-8")
    return path


def schema_drift(directory: Path) -> list[str]:
    """One line if the schema file is missing or differs from the model; empty when it matches."""
    path = directory / SCHEMA_FILE
    if not path.is_file():
        return [f"{SCHEMA_FILE}: missing"]
    if path.read_text(encoding="utf-8") != render_schema():
        return [f"{SCHEMA_FILE}: differs from fleetd.notify.payload.IncidentEvent"]
    return []


def assert_schema_matches(directory: Path) -> None:
    """Fail naming the file when ``directory`` does not hold the model's schema."""
    drift = schema_drift(directory)
    if drift:
        raise AssertionError(
            f"the webhook contract in {directory} drifted from the payload model "
            "(regenerate it with python -m fleetd.notify.contract contracts/webhook):\n  "
            + "\n  ".join(drift)
        )


def main(argv: list[str] | None = None) -> int:
    """Write (or with ``--check`` verify) the webhook payload schema in a directory."""
    parser = argparse.ArgumentParser(prog="python -m fleetd.notify.contract")
    parser.add_argument("directory", type=Path)
    parser.add_argument("--check", action="store_true", help="only report drift; exit 1 on any")
    args = parser.parse_args(argv)
    if args.check:
        drift = schema_drift(args.directory)
        for line in drift:
            sys.stderr.write(line + "\n")
        return 1 if drift else 0
    sys.stdout.write(f"{export_schema(args.directory)}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
