"""Suite-wide guard: every tool answer the suite renders obeys the envelope contract.

Both transports and the registry render an answer through :meth:`ToolResult.to_json`. The autouse
fixture below wraps it for every test, validates each document against
``contracts/api/tool-result.v1.schema.json`` and fails the test that produced a document breaking
it — so every error answer any test provokes (bad arguments, unknown profiles, refusals from the
bridge) is checked against the contract, not only the ones a contract test thinks of.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from fleetd.api.tools import RESULT_BREACH, ToolResult

ENVELOPE = Path(__file__).resolve().parents[1] / "contracts" / "api" / "tool-result.v1.schema.json"


@dataclass
class EnvelopeGuard:
    """What the wrapped ``to_json`` rendered during one test, and what broke the contract."""

    validator: Draft202012Validator
    rendered: list[dict[str, Any]] = field(default_factory=list)
    violations: list[tuple[dict[str, Any], list[str]]] = field(default_factory=list)

    def check(self, document: dict[str, Any]) -> None:
        self.rendered.append(document)
        errors = [e.message for e in self.validator.iter_errors(document)]
        if errors:
            self.violations.append((document, errors))


@pytest.fixture(scope="session")
def envelope_validator() -> Draft202012Validator:
    schema = json.loads(ENVELOPE.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


@pytest.fixture(autouse=True)
def envelope_guard(
    envelope_validator: Draft202012Validator, monkeypatch: pytest.MonkeyPatch
) -> Iterator[EnvelopeGuard]:
    """Validate every tool answer rendered during the test; a breach fails the test."""
    guard = EnvelopeGuard(envelope_validator)
    render = ToolResult.to_json

    def checked(self: ToolResult) -> dict[str, Any]:
        document = render(self)
        guard.check(document)
        return document

    monkeypatch.setattr(ToolResult, "to_json", checked)
    yield guard
    assert guard.violations == [], "tool answers break tool-result.v1.schema.json"


class ResultBreaches(logging.Handler):
    """Every tool result a test produced outside its declared result model (the registry logs it
    and answers anyway, so a caller never repeats work it was told failed)."""

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.seen: list[str] = []
        self.expected = False

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg == RESULT_BREACH:
            self.seen.append(record.getMessage())

    def expect(self) -> None:
        """This test provokes a breach on purpose."""
        self.expected = True


@pytest.fixture(autouse=True)
def result_breaches() -> Iterator[ResultBreaches]:
    """Fail any test in which a real tool answered outside its result schema."""
    handler = ResultBreaches()
    logger = logging.getLogger("fleetd.api")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
    if not handler.expected:
        assert handler.seen == [], "tool results break their contracts/api result schemas"
