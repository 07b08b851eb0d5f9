"""Waiting replies go to the member that wrote them: its owning lead's key, its name, its time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fleetd.bridge.backlog import MemberBacklog, member_backlogs
from fleetd.bridge.sessions import Session, SessionState
from fleetd.inbox.records import InboxStats, MessageKind, WaitingReply

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _session(sid: str, name: str, *, owner: str = "lead", at: datetime = T0) -> Session:
    return Session(
        session_id=sid,
        name=name,
        profile="codex",
        kind="codex",
        role=None,
        owner=owner,
        created_at=at,
        state=SessionState.DONE,
    )


def _stats(*replies: tuple[str, datetime | None]) -> InboxStats:
    waiting = tuple(
        WaitingReply(
            target=target,
            created_epoch_millis=None if at is None else int(at.timestamp() * 1000),
        )
        for target, at in replies
    )
    return InboxStats(
        depth=len(waiting),
        oldest_created_epoch_millis=None,
        by_kind={MessageKind.REPLY: len(waiting), MessageKind.HEALTH: 0},
        replies=waiting,
    )


def test_replies_are_counted_on_their_writer_with_the_oldest_time() -> None:
    """Two replies of one member: a count of two and the older creation time."""
    later = T0 + timedelta(minutes=5)
    backlogs = member_backlogs(
        {"lead": _stats(("m1", later), ("m1", T0), ("m2", T0))},
        [_session("s-1", "m1"), _session("s-2", "m2")],
    )
    assert backlogs == {
        "s-1": MemberBacklog(replies=2, oldest_at=T0),
        "s-2": MemberBacklog(replies=1, oldest_at=T0),
    }


def test_a_reused_name_does_not_inherit_its_predecessor_s_reply() -> None:
    """A reply created before a same-named session existed belongs to the older session."""
    new = T0 + timedelta(hours=1)
    sessions = [_session("s-old", "m1"), _session("s-new", "m1", at=new)]
    backlogs = member_backlogs({"lead": _stats(("m1", T0), ("m1", new))}, sessions)
    assert backlogs == {
        "s-old": MemberBacklog(replies=1, oldest_at=T0),
        "s-new": MemberBacklog(replies=1, oldest_at=new),
    }


def test_a_reply_counts_only_for_a_member_of_the_lead_whose_inbox_holds_it() -> None:
    """Another lead's member of the same name, and unknown targets, get nothing."""
    sessions = [_session("s-a", "m1", owner="lead-b")]
    assert member_backlogs({"lead": _stats(("m1", T0), ("gone", T0))}, sessions) == {}


def test_a_legacy_reply_without_a_time_goes_to_the_newest_session() -> None:
    """The previous build wrote no creation time: the newest session of that name takes it."""
    sessions = [_session("s-old", "m1"), _session("s-new", "m1", at=T0 + timedelta(hours=1))]
    backlogs = member_backlogs({"lead": _stats(("m1", None))}, sessions)
    assert backlogs == {"s-new": MemberBacklog(replies=1, oldest_at=None)}
