"""Preserved-worktree manifests: what an abnormal release leaves behind, findable after restart.

When a release preserves a member worktree, the live session that knew about it is about to go
away. Before it does, fleetd writes one manifest per session (M4 §5.3) so that
``fleet_list.preservedWorktrees`` can name the worktree after any restart, and the owning lead can
decide what to do with the work. fleetd never deletes a preserved worktree, and never deletes a
manifest either — not even a corrupt one.

Layout::

    <worktree root>/.fleetd-manifests/          mode 0700 when fleetd creates it
        <session_id>.json                       mode 0600, one JSON object (schema below)
        .<session_id>.<random>.tmp              only while a write is in flight

The file format is ``contracts/worktrees/manifest.v1.schema.json``: camelCase keys,
``schemaVersion: 1``, unknown extra keys ignored, missing or mistyped keys rejected.

Writes are atomic: the bytes go to a temporary file in the same directory, are fsynced, and
``os.replace`` moves them over the target, then the directory is fsynced. A reader sees the old
manifest or the new one, never half of either. A temporary file left by a crash is reported as an
incomplete write and left in place.

Loading never raises for one bad file. Each unreadable, torn, invalid or misnamed file becomes a
:class:`ManifestProblem` (file name and a bounded reason) beside the manifests that did load.
A :class:`ManifestShelf` keeps what it loaded and reads a file again only when the file changed
(its size, inode or modification time), so a reader that loads on every fleet view change lists
the directory but does not parse a thousand manifests each time.

The functions and :meth:`ManifestShelf.load` block on the filesystem; async callers run them with
``asyncio.to_thread``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from fleetd.bridge.release import ReleaseCause
from fleetd.errors import ManifestError

__all__ = [
    "MANIFEST_DIR",
    "SCHEMA_VERSION",
    "LoadResult",
    "ManifestFault",
    "ManifestProblem",
    "ManifestShelf",
    "PreservedWorktree",
    "decode_manifest",
    "encode_manifest",
    "load_manifests",
    "manifest_path",
    "write_manifest",
]

MANIFEST_DIR = ".fleetd-manifests"
SCHEMA_VERSION = 1
_SUFFIX = ".json"
_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


@dataclass(frozen=True, slots=True, kw_only=True)
class PreservedWorktree:
    """One preserved member worktree and the release that left it behind.

    ``repository`` and ``path`` are absolute path strings, recorded as they were at release.
    """

    session_id: str
    owner: str
    role: str
    profile: str
    repository: str
    path: str
    branch: str
    base_commit: str
    cause: ReleaseCause
    released_at: datetime
    state: str
    pending_task_ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not _SESSION_ID.fullmatch(self.session_id):
            raise ValueError("sessionId is not a safe file name")
        if not _COMMIT.fullmatch(self.base_commit):
            raise ValueError("baseCommit is not a full hex object id")
        if not (os.path.isabs(self.repository) and os.path.isabs(self.path)):
            raise ValueError("repository and path must be absolute")
        if not self.branch or not self.state:
            raise ValueError("branch and state must be non-empty")
        if self.released_at.utcoffset() is None:
            raise ValueError("releasedAt must carry a time zone")
        if not isinstance(self.pending_task_ids, tuple) or not all(
            isinstance(task_id, str) for task_id in self.pending_task_ids
        ):
            raise ValueError("pendingTaskIds must be a tuple of strings")
        object.__setattr__(self, "cause", ReleaseCause(self.cause))
        object.__setattr__(self, "released_at", self.released_at.astimezone(UTC))


class ManifestFault(StrEnum):
    """Why one manifest file did not load."""

    UNREADABLE = "unreadable"
    NOT_JSON = "not_json"
    INVALID = "invalid"
    UNSUPPORTED_VERSION = "unsupported_version"
    NAME_MISMATCH = "name_mismatch"
    INCOMPLETE_WRITE = "incomplete_write"


@dataclass(frozen=True, slots=True, kw_only=True)
class ManifestProblem:
    """A manifest file that did not load; ``detail`` names a field at most, never file content."""

    name: str
    reason: ManifestFault
    detail: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadResult:
    """Every manifest that loaded, oldest release first, and every file that did not."""

    manifests: tuple[PreservedWorktree, ...]
    errors: tuple[ManifestProblem, ...]


class _RejectedError(Exception):
    """Internal: one manifest was rejected. Never escapes this module."""

    def __init__(self, reason: ManifestFault, detail: str = "") -> None:
        super().__init__(reason, detail)
        self.reason = reason
        self.detail = detail


def encode_manifest(manifest: PreservedWorktree) -> dict[str, Any]:
    """The JSON object of a manifest, schema version 1."""
    return {
        "schemaVersion": SCHEMA_VERSION,
        "sessionId": manifest.session_id,
        "owner": manifest.owner,
        "role": manifest.role,
        "profile": manifest.profile,
        "repository": manifest.repository,
        "path": manifest.path,
        "branch": manifest.branch,
        "baseCommit": manifest.base_commit,
        "cause": manifest.cause.value,
        "releasedAt": manifest.released_at.isoformat(),
        "state": manifest.state,
        "pendingTaskIds": list(manifest.pending_task_ids),
    }


def decode_manifest(data: object) -> PreservedWorktree:
    """Parse a version-1 manifest object; raises ``ValueError`` naming the first bad field."""
    try:
        return _decode(data)
    except _RejectedError as exc:
        raise ValueError(f"{exc.reason}: {exc.detail}") from None


def manifest_path(root: Path, session_id: str) -> Path:
    """Where the manifest of ``session_id`` lives under the worktree root."""
    return root / MANIFEST_DIR / f"{session_id}{_SUFFIX}"


def write_manifest(root: Path, manifest: PreservedWorktree) -> Path:
    """Atomically write (or replace) the manifest of one session; returns its path.

    Raises :class:`~fleetd.errors.ManifestError` on any filesystem failure, leaving no temporary
    file behind when it can remove it. The worktree stays preserved either way.
    """
    target = manifest_path(root, manifest.session_id)
    payload = json.dumps(encode_manifest(manifest), indent=2, sort_keys=True).encode() + b"\n"
    try:
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(
            dir=target.parent, prefix=f".{manifest.session_id}.", suffix=".tmp"
        )
        try:
            with os.fdopen(fd, "wb") as handle:
                os.fchmod(handle.fileno(), 0o600)
                handle.write(payload)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        _fsync_directory(target.parent)
    except OSError as exc:
        raise ManifestError("write_manifest", "os_error", detail=str(exc)) from exc
    return target


def load_manifests(root: Path) -> LoadResult:
    """Load every manifest under the worktree root; one bad file never stops the rest."""
    return ManifestShelf(root).load()


_Loaded = PreservedWorktree | ManifestProblem


class ManifestShelf:
    """The manifests under one worktree root, each file parsed again only when it changed."""

    def __init__(self, root: Path) -> None:
        self._directory = root / MANIFEST_DIR
        self._files: dict[str, tuple[tuple[int, int, int], _Loaded]] = {}

    def load(self) -> LoadResult:
        """Every manifest, oldest release first, and every file that did not load."""
        try:
            entries = sorted(os.scandir(self._directory), key=lambda entry: entry.name)
        except FileNotFoundError:
            self._files = {}
            return LoadResult(manifests=(), errors=())
        except OSError:
            problem = ManifestProblem(name=MANIFEST_DIR, reason=ManifestFault.UNREADABLE)
            return LoadResult(manifests=(), errors=(problem,))
        files: dict[str, tuple[tuple[int, int, int], _Loaded]] = {}
        manifests: list[PreservedWorktree] = []
        errors: list[ManifestProblem] = []
        for entry in entries:
            name = entry.name
            if name.startswith(".") and name.endswith(".tmp"):
                errors.append(ManifestProblem(name=name, reason=ManifestFault.INCOMPLETE_WRITE))
                continue
            if not name.endswith(_SUFFIX) or name.startswith("."):
                continue
            files[name] = self._one(entry)
            loaded = files[name][1]
            if isinstance(loaded, PreservedWorktree):
                manifests.append(loaded)
            else:
                errors.append(loaded)
        self._files = files
        manifests.sort(key=lambda m: (m.released_at, m.session_id))
        return LoadResult(manifests=tuple(manifests), errors=tuple(errors))

    def _one(self, entry: os.DirEntry[str]) -> tuple[tuple[int, int, int], _Loaded]:
        try:
            stat = entry.stat()
            stamp = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        except OSError:
            stamp = (-1, -1, -1)  # unreadable now: parsed (and refused) again next time
        kept = self._files.get(entry.name)
        if kept is not None and kept[0] == stamp and stamp[0] >= 0:
            return kept
        try:
            loaded: _Loaded = _load_one(Path(entry.path))
        except _RejectedError as exc:
            loaded = ManifestProblem(name=entry.name, reason=exc.reason, detail=exc.detail)
        return stamp, loaded


def _load_one(file: Path) -> PreservedWorktree:
    try:
        raw = file.read_bytes()
    except OSError:
        raise _RejectedError(ManifestFault.UNREADABLE) from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except ValueError:  # JSONDecodeError and UnicodeDecodeError are both ValueErrors
        raise _RejectedError(ManifestFault.NOT_JSON) from None
    manifest = _decode(data)
    if f"{manifest.session_id}{_SUFFIX}" != file.name:
        raise _RejectedError(ManifestFault.NAME_MISMATCH, "sessionId")
    return manifest


def _decode(data: object) -> PreservedWorktree:
    if not isinstance(data, dict):
        raise _RejectedError(ManifestFault.INVALID, "not an object")
    version = data.get("schemaVersion")
    if type(version) is not int:
        raise _RejectedError(ManifestFault.INVALID, "schemaVersion")
    if version != SCHEMA_VERSION:
        raise _RejectedError(ManifestFault.UNSUPPORTED_VERSION, "schemaVersion")
    text = {key: _string(data, key) for key in _STRING_FIELDS}
    try:
        cause = ReleaseCause(text["cause"])
    except ValueError:
        raise _RejectedError(ManifestFault.INVALID, "cause") from None
    try:
        released_at = datetime.fromisoformat(text["releasedAt"])
    except ValueError:
        raise _RejectedError(ManifestFault.INVALID, "releasedAt") from None
    pending = data.get("pendingTaskIds")
    if not isinstance(pending, list) or not all(isinstance(item, str) for item in pending):
        raise _RejectedError(ManifestFault.INVALID, "pendingTaskIds")
    try:
        return PreservedWorktree(
            session_id=text["sessionId"],
            owner=text["owner"],
            role=text["role"],
            profile=text["profile"],
            repository=text["repository"],
            path=text["path"],
            branch=text["branch"],
            base_commit=text["baseCommit"],
            cause=cause,
            released_at=released_at,
            state=text["state"],
            pending_task_ids=tuple(pending),
        )
    except ValueError as exc:
        raise _RejectedError(ManifestFault.INVALID, str(exc)) from None


_STRING_FIELDS = (
    "sessionId",
    "owner",
    "role",
    "profile",
    "repository",
    "path",
    "branch",
    "baseCommit",
    "cause",
    "releasedAt",
    "state",
)


def _string(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise _RejectedError(ManifestFault.INVALID, key)
    return value


def _fsync_directory(directory: Path) -> None:
    """Make the rename durable: fsync the directory entry that now names the new file."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
