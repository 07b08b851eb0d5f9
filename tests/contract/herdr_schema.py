"""Validate frames against herdr's own JSON Schema (``../shared/herdr/herdr-api.schema.json``).

The schema is herdr's (Apache-2.0) and is not copied into the project: it is read from the
shared folder beside the repository. When that file is absent the tests that need it skip with
a clear message — except in CI (``CI=true``), where its absence is a failure.

Every ``$ref`` in the document reads ``#/schemas/<name>/$defs/...``, so each validator's root
is the whole document plus ``{"$ref": "#/schemas/<name>"}``.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

REPO = Path(__file__).resolve().parents[2]
SCHEMA_PATH = REPO.parent / "shared" / "herdr" / "herdr-api.schema.json"
ROOTS = ("request", "success_response", "error_response", "event", "subscription_event")


class HerdrSchema:
    """One Draft 2020-12 validator per top-level schema of herdr's API document."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self._validators = {
            name: Draft202012Validator({**document, "$ref": f"#/schemas/{name}"}) for name in ROOTS
        }

    def errors(self, root: str, frame: Any) -> list[str]:
        """Every violation of ``frame`` against ``root``, as readable strings."""
        found = self._validators[root].iter_errors(frame)
        return [f"{'/'.join(map(str, e.absolute_path)) or '<frame>'}: {e.message}" for e in found]

    @staticmethod
    def root_for(frame: dict[str, Any], *, sent_by_client: bool = False) -> str:
        """Which schema a frame belongs to, from its shape."""
        if sent_by_client:
            return "request"
        if "event" in frame:
            return "subscription_event" if "." in str(frame["event"]) else "event"
        return "error_response" if "error" in frame else "success_response"

    def check(self, frame: dict[str, Any], *, sent_by_client: bool = False) -> None:
        """Fail the test with every violation when ``frame`` does not match herdr's schema."""
        root = self.root_for(frame, sent_by_client=sent_by_client)
        problems = self.errors(root, frame)
        assert not problems, f"{root} frame violates herdr's schema: {problems}\n{frame}"


@functools.cache
def _load() -> HerdrSchema | None:
    if not SCHEMA_PATH.is_file():
        return None
    return HerdrSchema(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))


def herdr_schema() -> HerdrSchema:
    """The validator, or skip (fail in CI) when the shared schema file is absent."""
    schema = _load()
    if schema is None:
        message = f"herdr's API schema is not available at {SCHEMA_PATH}"
        if os.environ.get("CI") == "true":
            pytest.fail(message + " (required in CI)")
        pytest.skip(message + "; these contract tests need ../shared/herdr beside the repo")
    return schema
