"""Member marks: how fleetd knows its own members again after a crash.

As soon as herdr has created a member's pane, fleetd writes one mark for the session::

    <worktree root>/.fleetd-sessions/<session_id>/member.json     mode 0600

It names the run that spawned the member (:mod:`fleetd.runs`), the session, its herdr agent name
and pane, its owner, profile and role, and its worktree. A release removes the mark once the pane
is closed or known gone; when herdr could not be reached to close it the mark stays, so the next
run still finds the member. A clean stop releases every member, so marks outlive a run only when
it crashed or could not reach herdr on the way out. Marks are fleetd's own state; they never hold
a token, a prompt or pane text.

Writes are atomic (temporary file, then ``os.replace``). Loading skips a file it cannot read or
parse, and reads at most :data:`MARKS_READ` marks. Every function here blocks on the filesystem;
async callers run them with ``asyncio.to_thread``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from fleetd.bridge.sessions import Session
from fleetd.bridge.worktrees import Worktree
from fleetd.errors import FleetdError

__all__ = [
    "MARKS_READ",
    "SESSIONS_DIR",
    "MemberMark",
    "decode_mark",
    "encode_mark",
    "load_marks",
    "remove_mark",
    "write_mark",
]

SESSIONS_DIR = ".fleetd-sessions"
MARKS_READ = 256
_MARK_FILE = "member.json"
_VERSION = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberMark:
    """One member as the run that spawned it recorded it."""

    run: str
    session_id: str
    name: str
    profile: str
    kind: str
    role: str | None
    owner: str
    pane_id: str
    created_at: datetime
    worktree: Worktree | None = None

    def __post_init__(self) -> None:
        if self.created_at.utcoffset() is None:
            raise ValueError("createdAt must carry a time zone")
        if not all((self.run, self.session_id, self.name, self.owner, self.pane_id)):
            raise ValueError("run, sessionId, name, owner and paneId must be non-empty")


def mark_of(session: Session, *, run: str) -> MemberMark:
    """The mark of a member with a pane, as run ``run`` records it."""
    if session.pane_id is None:
        raise ValueError("a member without a pane has no mark")
    return MemberMark(
        run=run,
        session_id=session.session_id,
        name=session.name,
        profile=session.profile,
        kind=session.kind,
        role=session.role,
        owner=session.owner,
        pane_id=session.pane_id,
        created_at=session.created_at,
        worktree=session.worktree,
    )


def encode_mark(mark: MemberMark) -> dict[str, Any]:
    """The JSON object of a mark."""
    tree = mark.worktree
    return {
        "schemaVersion": _VERSION,
        "run": mark.run,
        "sessionId": mark.session_id,
        "name": mark.name,
        "profile": mark.profile,
        "kind": mark.kind,
        "role": mark.role,
        "owner": mark.owner,
        "paneId": mark.pane_id,
        "createdAt": mark.created_at.isoformat(),
        "worktree": None
        if tree is None
        else {
            "repository": str(tree.repo),
            "path": str(tree.path),
            "branch": tree.branch,
            "baseRef": tree.base_ref,
            "baseCommit": tree.base_commit,
        },
    }


def decode_mark(data: Any) -> MemberMark:
    """Parse a mark object; raises ``ValueError`` (or ``KeyError``/``TypeError``) when it is bad."""
    if not isinstance(data, dict) or data.get("schemaVersion") != _VERSION:
        raise ValueError("not a version-1 member mark")
    tree = data["worktree"]
    role = data["role"]
    return MemberMark(
        run=_text(data["run"]),
        session_id=_text(data["sessionId"]),
        name=_text(data["name"]),
        profile=_text(data["profile"]),
        kind=_text(data["kind"]),
        role=None if role is None else _text(role),
        owner=_text(data["owner"]),
        pane_id=_text(data["paneId"]),
        created_at=datetime.fromisoformat(_text(data["createdAt"])),
        worktree=None
        if tree is None
        else Worktree(
            repo=Path(_text(tree["repository"])),
            path=Path(_text(tree["path"])),
            branch=_text(tree["branch"]),
            base_ref=_text(tree["baseRef"]),
            base_commit=_text(tree["baseCommit"]),
        ),
    )


def write_mark(sessions: Path, mark: MemberMark) -> None:
    """Atomically write the mark of one session under the sessions directory."""
    directory = sessions / mark.session_id
    payload = json.dumps(encode_mark(mark), indent=2, sort_keys=True) + "\n"
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".member.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(payload)
            os.replace(tmp, directory / _MARK_FILE)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as exc:
        raise FleetdError("member mark not written") from exc


def remove_mark(sessions: Path, session_id: str) -> None:
    """Remove one session's directory: its mark and the launch files fleetd wrote beside it (the
    member's MCP config), which nothing needs once its pane is closed or gone. A missing
    directory is fine; so the sessions directory holds live members and orphans only."""
    directory = sessions / session_id
    if directory.parent != sessions or directory.name in ("", ".", ".."):
        raise FleetdError("member mark not removed: not a session directory")
    try:
        shutil.rmtree(directory)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise FleetdError("member mark not removed") from exc


def load_marks(sessions: Path, *, limit: int = MARKS_READ) -> tuple[MemberMark, ...]:
    """Every readable mark under the sessions directory, oldest first, at most ``limit``."""
    try:
        names = sorted(entry.name for entry in os.scandir(sessions) if entry.is_dir())
    except OSError:
        return ()
    marks: list[MemberMark] = []
    for name in names:
        try:
            raw = (sessions / name / _MARK_FILE).read_text(encoding="utf-8")
            mark = decode_mark(json.loads(raw))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # no mark (a launch directory only), or one we cannot read: not ours to act on
        if mark.session_id == name:
            marks.append(mark)
    marks.sort(key=lambda m: (m.created_at, m.session_id))
    return tuple(marks[-limit:])


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("expected a string")
    return value
