"""Whose replies wait uncollected: the lead inboxes read per member (M4 §4.1, §9).

Inboxes are per lead, but several member rules are about one member: its reply still waits in
its owning lead's inbox (REPLY_STRANDED once that lead's push reached its cap, WORK_PENDING
before), and ``idleForSeconds`` is shown only when nothing of it waits. This module reads each
lead's inbox statistics once and hands every waiting reply to the member that wrote it: the
session named by the record's ``target`` and owned by the recipient lead. Member names can be
reused after a release, so a reply goes to the newest such session that existed when the reply
was created (a legacy reply without a creation time goes to the newest one).

Only names, counts and times cross here — never reply content. Health records about a member are
not the member's backlog (a health message must not keep its own subject in a waiting state), and
entries the lead cannot collect (held for a decode failure) are not in ``replies`` at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from fleetd.bridge.sessions import Session
from fleetd.errors import FleetdError
from fleetd.inbox.port import ReplyInbox
from fleetd.inbox.records import InboxStats

__all__ = ["MemberBacklog", "member_backlogs", "read_lead_stats"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberBacklog:
    """One member's replies still waiting in its lead's inbox."""

    replies: int
    oldest_at: datetime | None


async def read_lead_stats(inbox: ReplyInbox, leads: Iterable[str]) -> dict[str, InboxStats]:
    """Inbox statistics of each lead whose key answers (an unreadable key is left out)."""
    stats: dict[str, InboxStats] = {}
    for lead in dict.fromkeys(leads):
        try:
            stats[lead] = await inbox.stats(lead)
        except FleetdError:
            continue
    return stats


def member_backlogs(
    stats: Mapping[str, InboxStats], sessions: Iterable[Session]
) -> dict[str, MemberBacklog]:
    """Waiting replies per session id, for sessions that have any (only the sessions a waiting
    reply could name are indexed: the tick and the fleet view call this over every session)."""
    named = {
        (lead, reply.target) for lead, lead_stats in stats.items() for reply in lead_stats.replies
    }
    if not named:
        return {}
    by_owner_name: dict[tuple[str, str], list[Session]] = {}
    for session in sessions:
        key = (session.owner, session.name)
        if key in named:
            by_owner_name.setdefault(key, []).append(session)
    for candidates in by_owner_name.values():
        candidates.sort(key=lambda s: s.created_at, reverse=True)
    waiting: dict[str, list[int | None]] = {}
    for lead, lead_stats in stats.items():
        for reply in lead_stats.replies:
            created = reply.created_epoch_millis
            writer = _writer(by_owner_name.get((lead, reply.target), ()), created)
            if writer is not None:
                waiting.setdefault(writer.session_id, []).append(created)
    return {
        sid: MemberBacklog(replies=len(times), oldest_at=_oldest(times))
        for sid, times in waiting.items()
    }


def _writer(newest_first: Iterable[Session], created: int | None) -> Session | None:
    for session in newest_first:
        if created is None or _millis(session.created_at) <= created:
            return session
    return None


def _millis(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def _oldest(times: Iterable[int | None]) -> datetime | None:
    known = [millis for millis in times if millis is not None]
    return datetime.fromtimestamp(min(known) / 1000, UTC) if known else None
