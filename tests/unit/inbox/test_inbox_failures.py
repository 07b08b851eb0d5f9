"""Decode failures are deduplicated, redacted, logged once and handed to the hook once."""

from __future__ import annotations

import logging

import pytest

from fleetd.clock import FakeClock
from fleetd.inbox.codec import DecodeReason, Invalid, UnsupportedVersion
from fleetd.inbox.failures import DecodeFailure, Disposition, FailureLog
from fleetd.inbox.seen import SeenIds


def test_unsupported_version_redelivered_is_one_failure(caplog: pytest.LogCaptureFixture) -> None:
    """The same held entry seen again counts occurrences but is one failure and one hook call."""
    clock = FakeClock()
    calls: list[DecodeFailure] = []
    log = FailureLog(clock=clock, on_decode_failure=calls.append)
    for _ in range(3):
        log.report(
            key="lead1",
            outcome=UnsupportedVersion(version=2),
            message_id="m-9",
            digest="d1",
            disposition=Disposition.HELD,
        )
        clock.advance(5)
    [failure] = log.summaries()
    assert (failure.reason, failure.version, failure.occurrences) == ("unsupported_version", 2, 3)
    assert failure.last_seen_epoch_millis - failure.first_seen_epoch_millis == 10_000
    assert len(calls) == 1
    assert len([r for r in caplog.records if r.name == "fleetd.inbox"]) == 1


def test_distinct_bodies_with_one_id_are_distinct_failures() -> None:
    """Identity is key, message id and body digest together."""
    log = FailureLog(clock=FakeClock(), on_decode_failure=None)
    for digest in ("d1", "d2"):
        log.report(
            key="lead1",
            outcome=Invalid(reason=DecodeReason.MALFORMED_JSON),
            message_id="same",
            digest=digest,
            disposition=Disposition.QUARANTINED,
        )
    assert len(log.summaries()) == 2


def test_disposition_change_updates_and_logs_again(caplog: pytest.LogCaptureFixture) -> None:
    """A quarantine that succeeds on retry updates the summary and logs the new disposition."""
    caplog.set_level(logging.WARNING, logger="fleetd.inbox")
    calls: list[DecodeFailure] = []
    log = FailureLog(clock=FakeClock(), on_decode_failure=calls.append)
    outcome = Invalid(reason=DecodeReason.MISSING_FIELD, detail="msgId")
    for disposition in (Disposition.QUARANTINE_PENDING, Disposition.QUARANTINED):
        log.report(
            key="lead1", outcome=outcome, message_id=None, digest="d", disposition=disposition
        )
    assert [f.disposition for f in log.summaries()] == [Disposition.QUARANTINED]
    assert len(calls) == 1
    messages = [r.getMessage() for r in caplog.records if r.name == "fleetd.inbox"]
    assert len(messages) == 2
    assert "disposition=quarantined" in messages[-1]
    assert "detail=msgId" in messages[-1]


def test_log_line_carries_no_foreign_text(caplog: pytest.LogCaptureFixture) -> None:
    """An odd message id is replaced in the summary and the WARN line."""
    log = FailureLog(clock=FakeClock(), on_decode_failure=None)
    failure = log.report(
        key="lead1",
        outcome=Invalid(reason=DecodeReason.UNKNOWN_MEDIA_TYPE),
        message_id="password=hunter2 \n",
        digest="d",
        disposition=Disposition.QUARANTINED,
    )
    assert failure.message_id == "<unprintable>"
    assert "hunter2" not in caplog.text


def test_faulty_hook_does_not_escape(caplog: pytest.LogCaptureFixture) -> None:
    """A hook that raises is logged by type name and the failure is still recorded."""

    def broken(failure: DecodeFailure) -> None:
        raise RuntimeError("boom with details")

    log = FailureLog(clock=FakeClock(), on_decode_failure=broken)
    log.report(
        key="lead1",
        outcome=Invalid(reason=DecodeReason.MALFORMED_UTF8),
        message_id="m",
        digest="d",
        disposition=Disposition.QUARANTINED,
    )
    assert len(log.summaries()) == 1
    assert "RuntimeError" in caplog.text
    assert "boom with details" not in caplog.text


def test_failure_memory_is_bounded() -> None:
    """Only the newest failures are kept."""
    log = FailureLog(clock=FakeClock(), on_decode_failure=None, capacity=2)
    for digest in ("a", "b", "c"):
        log.report(
            key="k",
            outcome=Invalid(reason=DecodeReason.MALFORMED_JSON),
            message_id=digest,
            digest=digest,
            disposition=Disposition.QUARANTINED,
        )
    assert [f.message_id for f in log.summaries()] == ["b", "c"]


def test_seen_ids_forget_the_least_recent_beyond_capacity() -> None:
    """The id memory is an LRU: touching an id keeps it, the oldest untouched one goes."""
    seen = SeenIds(2)
    seen.add(("k", "1"))
    seen.add(("k", "2"))
    seen.add(("k", "1"))
    seen.add(("k", "3"))
    assert ("k", "1") in seen
    assert ("k", "2") not in seen
    seen.forget_key("k")
    assert len(seen) == 0
    with pytest.raises(ValueError, match="capacity"):
        SeenIds(0)
