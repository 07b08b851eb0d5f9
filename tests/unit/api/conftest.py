"""Fixtures for the API tests: a fresh stand-in registry, its call log, and an authenticator."""

from __future__ import annotations

import pytest

from fleetd.api.auth import Authenticator
from fleetd.api.tools import ToolRegistry
from tests.unit.api.api_doubles import (
    LEAD_TOKEN,
    OPERATOR_TOKEN,
    OTHER_LEAD_TOKEN,
    Calls,
    build_registry,
)


@pytest.fixture
def calls() -> Calls:
    return Calls()


@pytest.fixture
def registry(calls: Calls) -> ToolRegistry:
    return build_registry(calls)


@pytest.fixture
def authenticator() -> Authenticator:
    return Authenticator(
        lead_tokens={"alpha": LEAD_TOKEN, "beta": OTHER_LEAD_TOKEN}, operator_token=OPERATOR_TOKEN
    )
