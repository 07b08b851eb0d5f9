"""A standby waits out a state store that does not answer: it never stops waiting for it."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from fleetd import serving
from fleetd.config import ConfigRef, parse_config
from fleetd.errors import StateStoreError
from fleetd.testing import sample_document


class _Lock:
    instance = "alpha"

    def holder(self) -> None:
        return None


class _Opened:
    """A standby's opened store whose lock tries fail ``failures`` times, then take the lock."""

    def __init__(self, failures: int) -> None:
        self.lock = _Lock()
        self.failures = failures
        self.tries = 0

    def take_over(self, _now: datetime) -> bool:
        self.tries += 1
        if self.tries <= self.failures:
            raise StateStoreError("lock", "unavailable")
        return True


async def test_a_standby_waits_out_a_store_that_does_not_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Three tries of the lock fail (the database is away): the standby says so once, keeps
    trying, says when the store answers again, and takes over — it used to exit with status 2
    at the first failure, leaving the instance without a standby."""
    env = {"T_LEAD": "x" * 32, "T_LEAD_B": "y" * 32, "T_OPERATOR": "z" * 32}
    loaded = parse_config(sample_document(tmp_path), env, base_dir=tmp_path)
    ref = ConfigRef(loaded, environ=env, now=datetime.now(UTC))

    async def no_server(_self: Any, sockets: Any = None) -> None:
        return None

    monkeypatch.setattr(serving._StandbyServer, "serve", no_server)
    monkeypatch.setattr(serving, "standby_poll", lambda _ref: 0.0)
    state = _Opened(failures=3)
    caplog.set_level(logging.INFO, logger="fleetd")
    assert await serving.wait_as_standby(ref, state)  # type: ignore[arg-type]
    assert state.tries == 4
    assert caplog.text.count("the state store cannot be asked") == 1
    assert caplog.text.count("the state store answers again") == 0  # taken at once
