"""The strict gates of lost-boundary repair and the resolver's two policies, as tables."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from fleetd.bridge import ResultSource, TicketOutcome
from fleetd.bridge.repair_gates import (
    MAX_ATTEMPTS,
    RETRY_DELAY,
    BaselineFacts,
    Refusal,
    RepairResult,
    TurnFacts,
    judge_turn,
    record,
)
from fleetd.bridge.resolver import Policy, Resolve, Scrape, judge_scrape, unchanged
from fleetd.bridge.turns import BaselineCapture, DeliveryBaseline, RepairLedger
from fleetd.screens import (
    CLIPPED_TAIL_MARKER,
    COMPLETION_FALLBACK_MARKER,
    RAW_TEXT_MARKER,
    READ_FAILED_NOTE,
    REPAIRED_COMPLETION_MARKER,
    UNCHANGED_MARKER,
    CaptureResult,
    Extraction,
)
from fleetd.screens.fatal import FatalSignature, match_fatal
from fleetd.screens.kinds import AgentKind

R = RepairResult
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
GOOD_BASELINE = BaselineFacts(capture=BaselineCapture.PRESENT, same_token=True, late=False)
HELD = TurnFacts(
    token_known=True,
    token_open=True,
    ticket=TicketOutcome.PENDING,
    same_turn_busy=True,
    stable=True,
    storing_reply=False,
    kind_enabled=True,
    baseline=GOOD_BASELINE,
    ledger=RepairLedger(),
    now=NOW,
)


def test_every_gate_holding_reads_the_pane() -> None:
    """With every gate before the read holding, the answer is: read the pane."""
    assert judge_turn(HELD) is None


@pytest.mark.parametrize(
    ("change", "result", "detail"),
    [
        ({"token_known": False}, R.STALE_TURN, "token_unknown"),
        ({"token_open": False}, R.STALE_TURN, "turn_moved_on"),
        (
            {"token_open": False, "ticket": TicketOutcome.DONE},
            R.ALREADY_RESOLVED,
            "resolved",
        ),
        (
            {"token_open": False, "ticket": TicketOutcome.FAILED, "stable": False},
            R.STALE_TURN,
            "turn_moved_on",
        ),
        ({"same_turn_busy": False}, R.RACE_LOST, "not_busy_on_turn"),
        ({"storing_reply": True}, R.RACE_LOST, "reply_being_stored"),
        ({"stable": False}, R.RACE_LOST, "not_stable_at_prompt"),
        ({"ticket": TicketOutcome.DONE}, R.ALREADY_RESOLVED, "resolved_same_turn"),
        ({"ticket": TicketOutcome.FAILED}, R.STALE_TURN, "waiter_closed"),
        ({"ticket": TicketOutcome.CANCELLED}, R.STALE_TURN, "waiter_closed"),
        ({"ticket": None}, R.STALE_TURN, "waiter_closed"),
        ({"baseline": None}, R.REFUSED_NO_CAPTURE, "no_capture"),
        (
            {"baseline": replace(GOOD_BASELINE, same_token=False)},
            R.REFUSED_NO_CAPTURE,
            "capture_of_another_turn",
        ),
        ({"kind_enabled": False}, R.REFUSED_NO_BASELINE, "kind_not_enabled"),
        (
            {"baseline": replace(GOOD_BASELINE, capture=BaselineCapture.READ_FAILED)},
            R.REFUSED_NO_BASELINE,
            "baseline_read_failed",
        ),
        (
            {"baseline": replace(GOOD_BASELINE, capture=BaselineCapture.UNRECOGNISED)},
            R.REFUSED_NO_BASELINE,
            "baseline_unrecognised",
        ),
        ({"baseline": replace(GOOD_BASELINE, late=True)}, R.REFUSED_NO_BASELINE, "baseline_late"),
    ],
)
def test_each_gate_answers_with_its_typed_result(
    change: dict[str, object], result: RepairResult, detail: str
) -> None:
    """The first failing gate names the result (Figure 3 order)."""
    assert judge_turn(replace(HELD, **change)) == Refusal(result=result, detail=detail)  # type: ignore[arg-type]


def test_gates_are_judged_in_figure_three_order() -> None:
    """An unstable turn is a lost race before its missing capture or closed waiter is looked at."""
    facts = replace(HELD, stable=False, baseline=None, ticket=TicketOutcome.FAILED)
    assert judge_turn(facts) == Refusal(result=R.RACE_LOST, detail="not_stable_at_prompt")
    assert judge_turn(replace(facts, stable=True)) == Refusal(
        result=R.STALE_TURN, detail="waiter_closed"
    )


@pytest.mark.parametrize(
    ("ledger", "result", "detail"),
    [
        (RepairLedger(attempts=2, last="refused_unchanged"), R.REFUSED_UNCHANGED, "stopped"),
        (
            RepairLedger(attempts=1, last="refused_unreadable", retry_at=NOW + timedelta(1)),
            R.REFUSED_UNREADABLE,
            "retry_not_due",
        ),
    ],
)
def test_a_token_that_may_not_be_tried_now_gets_its_last_answer_again(
    ledger: RepairLedger, result: RepairResult, detail: str
) -> None:
    """Stopped or not yet due: no read, the last result again."""
    answer = judge_turn(replace(HELD, ledger=ledger))
    assert answer is not None
    assert answer.result is result
    assert answer.detail == ("repair_stopped_for_token" if detail == "stopped" else detail)


def test_a_due_retry_passes_the_quota() -> None:
    """At the retry time the gates are judged again."""
    ledger = RepairLedger(attempts=1, last="refused_unchanged", retry_at=NOW)
    assert judge_turn(replace(HELD, ledger=ledger)) is None


@pytest.mark.parametrize(
    ("answers", "retry"),
    [
        ([R.REFUSED_UNCHANGED], True),
        ([R.REFUSED_UNREADABLE], True),
        ([R.REFUSED_AMBIGUOUS_OUTPUT], True),
        ([R.REFUSED_UNCHANGED, R.REFUSED_UNREADABLE], False),  # two refused scrapes: stop
        ([R.REFUSED_NO_CAPTURE], False),
        ([R.REFUSED_NO_BASELINE], False),
        ([R.RACE_LOST], True),
        ([R.RACE_LOST, R.RACE_LOST], True),
        ([R.RACE_LOST] * MAX_ATTEMPTS, False),
        ([R.REFUSED_UNCHANGED, R.RACE_LOST], False),  # the one retry was spent
        ([R.RACE_LOST, R.REFUSED_UNCHANGED], True),
        ([R.RACE_LOST, R.RACE_LOST, R.REFUSED_UNCHANGED], False),  # MAX_ATTEMPTS reached
        ([R.STALE_TURN], False),
    ],
)
def test_retry_ledger(answers: list[RepairResult], retry: bool) -> None:
    """At most one delayed retry after a refused scrape; none after a missing capture/baseline."""
    ledger = RepairLedger()
    for answer in answers:
        ledger = record(ledger, Refusal(result=answer, detail="x"), NOW)
    assert ledger.attempts == len(answers)
    assert ledger.last == answers[-1].value
    assert ledger.retry_at == (NOW + RETRY_DELAY if retry else None)


def test_result_values_are_stable() -> None:
    """Typed results reach metric labels, evidence and JSON: their values are pinned."""
    assert [r.value for r in RepairResult] == [
        "repaired",
        "already_resolved",
        "refused_no_capture",
        "refused_no_baseline",
        "refused_unreadable",
        "refused_unchanged",
        "refused_ambiguous_output",
        "stale_turn",
        "race_lost",
    ]


# --- the resolver guard core's two policies ---------------------------------------------------

BASE = DeliveryBaseline(
    token_id="t",
    captured_at=NOW,
    source="visible",
    text="Earlier answer.",
    marker_recognised=True,
    capture=BaselineCapture.PRESENT,
    clip_chars=100,
)
FATAL: FatalSignature | None = match_fatal(
    AgentKind.CLAUDE,
    "❯ go\n\n● API Error: 529 Overloaded. This is a server-side issue, usually temporary — try"
    " again in a moment. If it persists, check https://status.claude.com.\n",
)


def _scrape(
    text: str = "New answer.",
    *,
    capture: CaptureResult = CaptureResult.PRESENT,
    clipped: bool = False,
    fatal: FatalSignature | None = None,
) -> Scrape:
    if capture is CaptureResult.READ_FAILED:
        return Scrape(extraction=Extraction.read_failed(), clip_chars=100)
    extraction = Extraction(
        text=text,
        marker_recognised=capture is CaptureResult.PRESENT,
        clipped=clipped,
        capture=capture,
    )
    return Scrape(extraction=extraction, clip_chars=100, fatal=fatal)


def test_the_fatal_fixture_is_a_signature() -> None:
    """The error screen used below really matches a tested signature."""
    assert FATAL is not None


@pytest.mark.parametrize(
    ("scrape", "baseline", "result", "detail"),
    [
        (
            _scrape(capture=CaptureResult.READ_FAILED),
            BASE,
            R.REFUSED_UNREADABLE,
            "pane_read_failed",
        ),
        (
            _scrape(capture=CaptureResult.UNRECOGNISED),
            BASE,
            R.REFUSED_AMBIGUOUS_OUTPUT,
            "no_assistant_marker",
        ),
        (_scrape("", fatal=FATAL), BASE, R.REFUSED_AMBIGUOUS_OUTPUT, "error_on_screen"),
        (_scrape("   "), BASE, R.REFUSED_AMBIGUOUS_OUTPUT, "no_assistant_text"),
        (_scrape(), None, R.REFUSED_NO_BASELINE, "no_baseline"),
        (
            _scrape(),
            replace(BASE, capture=BaselineCapture.UNRECOGNISED, marker_recognised=False),
            R.REFUSED_NO_BASELINE,
            "no_baseline",
        ),
        (_scrape("Earlier answer."), BASE, R.REFUSED_UNCHANGED, "same_as_baseline"),
    ],
)
def test_repair_policy_refuses_without_any_fail_open_rule(
    scrape: Scrape, baseline: DeliveryBaseline | None, result: RepairResult, detail: str
) -> None:
    """Unreadable, raw, error, blank, baseline-less or unchanged scrapes never resolve a repair."""
    verdict = judge_scrape(Policy.LOST_BOUNDARY_REPAIR, scrape, baseline)
    assert verdict == Refusal(result=result, detail=detail)


def test_repair_policy_resolves_new_recognised_text_with_the_repaired_marker() -> None:
    """New text resolves as ``repaired``, marked; clipping keeps its extra marker."""
    verdict = judge_scrape(Policy.LOST_BOUNDARY_REPAIR, _scrape(clipped=True), BASE)
    assert isinstance(verdict, Resolve)
    assert verdict.source is ResultSource.REPAIRED
    assert verdict.content == (
        f"{REPAIRED_COMPLETION_MARKER}\n{CLIPPED_TAIL_MARKER}\n\nNew answer."
    )


@pytest.mark.parametrize(
    ("scrape", "baseline", "source", "content"),
    [
        (
            _scrape(capture=CaptureResult.READ_FAILED),
            BASE,
            ResultSource.RAW_FALLBACK,
            f"{COMPLETION_FALLBACK_MARKER}\n\n{READ_FAILED_NOTE}",
        ),
        (
            _scrape(),
            None,
            ResultSource.FALLBACK,
            f"{COMPLETION_FALLBACK_MARKER}\n\nNew answer.",
        ),
        (
            _scrape("screen tail", capture=CaptureResult.UNRECOGNISED),
            BASE,
            ResultSource.RAW_FALLBACK,
            f"{COMPLETION_FALLBACK_MARKER}\n{RAW_TEXT_MARKER}\n\nscreen tail",
        ),
        (
            _scrape("Earlier answer."),
            BASE,
            ResultSource.FALLBACK,
            f"{COMPLETION_FALLBACK_MARKER}\n{UNCHANGED_MARKER}\n\nEarlier answer.",
        ),
    ],
)
def test_observed_boundary_policy_keeps_its_fail_open_rules(
    scrape: Scrape, baseline: DeliveryBaseline | None, source: ResultSource, content: str
) -> None:
    """After a trusted boundary: an unreadable pane or no baseline still resolves, marked."""
    verdict = judge_scrape(Policy.OBSERVED_BOUNDARY, scrape, baseline)
    assert verdict == Resolve(content=content, source=source)


@pytest.mark.parametrize(
    ("text", "baseline", "clip_chars", "same"),
    [
        ("Earlier answer.", BASE, 100, True),
        ("Other answer.", BASE, 100, False),
        ("", replace(BASE, text=""), 100, False),  # nothing to compare: not "unchanged"
        ("xx answer.", replace(BASE, text="yy answer.", clip_chars=7), 100, True),  # same tail
        ("xx answer.", replace(BASE, text="yy answer."), 7, True),
        ("xx answer.", replace(BASE, text="yy answer."), 100, False),
    ],
)
def test_unchanged_compares_the_same_clipped_tail(
    text: str, baseline: DeliveryBaseline, clip_chars: int, same: bool
) -> None:
    """The baseline and the new block are compared over the shorter of their clip limits."""
    extraction = Extraction(
        text=text, marker_recognised=True, clipped=False, capture=CaptureResult.PRESENT
    )
    assert unchanged(extraction, baseline, clip_chars) is same
