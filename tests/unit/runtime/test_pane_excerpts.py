"""The excerpt store behind ``health.includePaneExcerpt``: kept only while the key is on, shown
only while recent, bounded, and added to a lead's record text alone."""

from __future__ import annotations

from datetime import timedelta

from fleetd.health.incidents import Incident
from fleetd.inbox.records import InboxRecord, MessageKind, Severity
from fleetd.runtime.pane_excerpts import EXCERPT_MAX_AGE, EXCERPTS_KEPT, PaneExcerpts
from tests.contract.journal_cases import T0, make_incident


def _record(incident: Incident) -> InboxRecord:
    return InboxRecord(
        msg_id=f"health-{incident.id}",
        kind=MessageKind.HEALTH,
        target=incident.target or incident.subject,
        recipient_lead="lead",
        content="fleetd health: summary.",
        created_at_epoch_millis=0,
        subject_terminal=incident.subject,
        severity=Severity.CRITICAL,
        state="GONE",
        evidence={"tickets": 1},
        first_seen_epoch_millis=0,
        last_seen_epoch_millis=0,
        recovery_tried=False,
        suggested_tool_calls=(),
    )


def test_a_recent_read_is_appended_to_the_record_text_only() -> None:
    """The text ends with the marker and the redacted excerpt; nothing else of the record moves."""
    store = PaneExcerpts(enabled=lambda: True, known=lambda: ("swordfish-42",))
    store.note(
        "term_m1", "ran with swordfish-42\nerror: boom\n", read_at=T0, reason="final_evidence"
    )
    incident = make_incident()
    record = _record(incident)
    shown = store.attach(record, incident, now=T0 + timedelta(seconds=30))
    summary, blank, marker, *excerpt = shown.content.split("\n")
    assert (summary, blank) == (record.content, "")
    assert marker.startswith(
        "[pane excerpt - term_m1's screen as fleetd's health check read it 30 s"
    )
    assert "(final_evidence)" in marker
    assert excerpt == ["ran with [redacted]", "error: boom"]
    assert shown.evidence == record.evidence
    assert shown.msg_id == record.msg_id


def test_nothing_is_kept_or_shown_while_the_key_is_off() -> None:
    """Off: a read keeps nothing; turned off after a read: what was kept is dropped."""
    enabled = {"on": False}
    store = PaneExcerpts(enabled=lambda: enabled["on"], known=tuple)
    incident = make_incident()
    store.note("term_m1", "screen", read_at=T0, reason="final_evidence")
    assert len(store) == 0
    enabled["on"] = True
    store.note("term_m1", "screen", read_at=T0, reason="final_evidence")
    assert len(store) == 1
    enabled["on"] = False
    record = _record(incident)
    assert store.attach(record, incident, now=T0) is record
    assert len(store) == 0


def test_an_old_read_another_target_s_read_or_an_empty_one_is_not_shown() -> None:
    """A screen read that is too old, taken from another target, blank, or for an incident
    without a target is not attached to the record."""
    store = PaneExcerpts(enabled=lambda: True, known=tuple)
    incident = make_incident()
    record = _record(incident)
    store.note("term_m1", "screen", read_at=T0, reason="working_suspect")
    assert store.attach(record, incident, now=T0 + EXCERPT_MAX_AGE + timedelta(seconds=1)) is record
    other = make_incident("sess_2", target="term_m2")
    assert store.attach(_record(other), other, now=T0) == _record(other)
    store.note("term_m1", "\n\n", read_at=T0, reason="working_suspect")
    assert store.attach(record, incident, now=T0) is record
    lead = make_incident("lead", target=None)
    assert store.attach(_record(lead), lead, now=T0) == _record(lead)


def test_at_most_a_bounded_number_of_targets_is_kept() -> None:
    """The oldest read goes first."""
    store = PaneExcerpts(enabled=lambda: True, known=tuple)
    for n in range(EXCERPTS_KEPT + 5):
        store.note(f"term_{n}", "screen", read_at=T0, reason="working_suspect")
    assert len(store) == EXCERPTS_KEPT
    first = make_incident(target="term_0")
    assert store.attach(_record(first), first, now=T0) == _record(first)
    last = make_incident(target=f"term_{EXCERPTS_KEPT + 4}")
    assert "[pane excerpt" in store.attach(_record(last), last, now=T0).content
