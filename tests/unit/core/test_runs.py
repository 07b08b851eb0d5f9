"""Runs of fleetd: ids name their run, and a bounded record of recent runs survives restarts."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetd.runs import (
    RUNS_FILE,
    RUNS_KEPT,
    Runs,
    remember_run,
    run_of_ticket,
    run_of_token,
    ticket_id,
)


def test_ticket_ids_and_tokens_name_their_run() -> None:
    """The run is read back from a ticket id or a token, and from nothing else."""
    run = Runs().current
    assert run_of_ticket(ticket_id(run, 3, "a1b2c3")) == run
    assert run_of_token(f"{run}.secret-part") == run
    for ticket in ("t1-abcdef", "t-unknown", "", "t1-abcdef-rXYZ"):
        assert run_of_ticket(ticket) is None
    for token in ("plain", f"{run}", "rzzzzzzzz.secret", ".secret"):
        assert run_of_token(token) is None


def test_only_a_recorded_earlier_run_has_ended() -> None:
    """This run, an unrecorded run and no run at all are never called a previous run."""
    runs = Runs(current="r00000001", previous=frozenset({"r00000000"}))
    assert runs.ended("r00000000")
    assert not runs.ended("r00000001")
    assert not runs.ended("r0000000f")
    assert not runs.ended(None)
    with pytest.raises(ValueError, match="run id"):
        Runs(current="run-1")


def test_the_record_keeps_the_newest_runs_only(tmp_path: Path) -> None:
    """Each start adds its run; the file keeps the last RUNS_KEPT and skips lines it cannot use."""
    root = tmp_path / "state"
    assert remember_run(root, "r00000000") == frozenset()
    (root / RUNS_FILE).write_text((root / RUNS_FILE).read_text() + "garbage\n")
    ids = [f"r{n:08x}" for n in range(1, RUNS_KEPT + 5)]
    seen: frozenset[str] = frozenset()
    for run in ids:
        seen = remember_run(root, run)
    assert "garbage" not in seen
    assert len(seen) == RUNS_KEPT
    assert len((root / RUNS_FILE).read_text().split()) == RUNS_KEPT
    assert ids[-2] in seen
    assert "r00000000" not in seen
    assert list(root.iterdir()) == [root / RUNS_FILE]
